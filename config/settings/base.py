"""Settings shared by every environment. Values that differ between machines come from the environment."""

from __future__ import annotations

import json
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from apps.core import embedded_db

BASE_DIR = Path(__file__).resolve().parent.parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value not in (None, "") else default


SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "kgchat-local-development-key-not-for-production")
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",")
    if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "channels",
    "apps.projects",
    "apps.graph_tools",
    "apps.agents",
    "apps.documents",
    "apps.chat",
    "apps.usage",
    "apps.curation",
    "apps.evals",
]

MIDDLEWARE = [
    "config.middleware.ApiJsonErrorsMiddleware",
    "config.middleware.ApiInputMiddleware",
    # Django's own; those from config.middleware run their hooks that do no I/O on the event loop.
    # The security, CSRF and clickjacking ones stay Django's classes: `check --deploy` looks for
    # them by name.
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.SessionMiddleware",
    "config.middleware.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "config.middleware.AuthenticationMiddleware",
    "config.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_database_url = os.environ.get("DATABASE_URL")
DATABASES = {
    "default": (dj_database_url.parse(_database_url) if _database_url else embedded_db.database_settings())
}
DATABASES["default"].setdefault("OPTIONS", {})
# One pool of connections per process (psycopg's pool, through Django): every sync_to_async thread
# borrows a connection and gives it back, so N processes hold at most N x KGCHAT_DB_POOL_MAX
# connections (keep that under the server's max_connections: 100, 3 reserved, on the embedded one).
# A request that waits longer than KGCHAT_DB_POOL_TIMEOUT seconds answers 503 "database_busy".
# KGCHAT_DB_POOL_MAX=0 turns the pool off (e.g. behind PgBouncer); connections then close after use.
KGCHAT_DB_POOL_MAX = env_int("KGCHAT_DB_POOL_MAX", 20)
if KGCHAT_DB_POOL_MAX > 0:
    DATABASES["default"]["OPTIONS"]["pool"] = {
        "min_size": min(env_int("KGCHAT_DB_POOL_MIN", 2), KGCHAT_DB_POOL_MAX),
        "max_size": KGCHAT_DB_POOL_MAX,
        "timeout": float(os.environ.get("KGCHAT_DB_POOL_TIMEOUT") or 10),
    }
    # A pooled connection outlives its request, so the statements a turn sends every time (the
    # server-bound ones of apps/core/db.py: admission, history, its events, the answer, the API
    # token) are prepared on it at their first run: PostgreSQL stops planning them once it has
    # settled on a generic plan, ~1 of the ~1.2 ms such a read cost (docs/benchmarks.md). Django's
    # other queries bind client-side, which psycopg never prepares. Without the pool (behind
    # PgBouncer) nothing is prepared.
    DATABASES["default"]["OPTIONS"].setdefault("prepare_threshold", 0)
# Pooled connections are returned after each use, never kept by a thread (Django requires 0).
DATABASES["default"]["CONN_MAX_AGE"] = 0
# The pool checks a connection before lending it, replacing one the server closed (a socket probe,
# no round trip unless the server closed it: config/db/base.py).
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
# PostgreSQL plus the kb schema's tables in introspection (see config/db/base.py).
DATABASES["default"]["ENGINE"] = "config.db"

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/chat/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / ".data" / "staticfiles"
# Whether the app process serves /static/ itself (make run); production puts a web server in front.
KGCHAT_SERVE_STATIC = env_bool("KGCHAT_SERVE_STATIC", True)

REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # redis-py's default socket timeout (5 s) equals channels-redis's blocking pop (5 s); a read
            # timing out first crashes the websocket consumer (close 1011), so reads wait longer.
            "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 15}]},
        }
    }
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

# kgchat's own settings (PROTOCOL §7).
KGCHAT_MODEL = os.environ.get("KGCHAT_MODEL", "")
# The model of plain (not agent-backed) conversations, unless KGCHAT_MODEL overrides it.
KGCHAT_CHAT_MODEL = os.environ.get("KGCHAT_CHAT_MODEL", "gemini-2.0-flash")
KGCHAT_EMBEDDINGS = os.environ.get("KGCHAT_EMBEDDINGS", "")
KGCHAT_MAX_MESSAGE_CHARS = env_int("KGCHAT_MAX_MESSAGE_CHARS", 32000)
KGCHAT_IMPORT_MAX_BYTES = env_int("KGCHAT_IMPORT_MAX_BYTES", 50 * 1024 * 1024)
# The largest body of an MCP request (a tool call's JSON-RPC message): the MCP SDK reads it whole.
KGCHAT_MCP_MAX_BYTES = env_int("KGCHAT_MCP_MAX_BYTES", 1024 * 1024)
# Uploaded documents (apps/documents): the largest file, and the most pages of a PDF.
KGCHAT_DOCUMENT_MAX_BYTES = env_int("KGCHAT_DOCUMENT_MAX_BYTES", 20 * 1024 * 1024)
KGCHAT_DOCUMENT_MAX_PAGES = env_int("KGCHAT_DOCUMENT_MAX_PAGES", 500)
# Pages read by OCR in one upload (a scanned PDF's pages without text; about 0.6 s each on one core:
# the upload waits for them), a workbook's sheets, and the rows of a file's tables, all sheets
# together (each row is a passage). The OCR engine's languages: tesseract's names, joined by "+".
KGCHAT_DOCUMENT_MAX_OCR_PAGES = env_int("KGCHAT_DOCUMENT_MAX_OCR_PAGES", 50)
KGCHAT_DOCUMENT_MAX_SHEETS = env_int("KGCHAT_DOCUMENT_MAX_SHEETS", 50)
KGCHAT_DOCUMENT_MAX_ROWS = env_int("KGCHAT_DOCUMENT_MAX_ROWS", 20000)
KGCHAT_OCR_LANGUAGES = os.environ.get("KGCHAT_OCR_LANGUAGES", "eng")
# Passages the background worker asks the model about at once (issue #26; ``local_server``: three slots,
# two for this and one for chat).
KGCHAT_EXTRACTION_CONCURRENCY = env_int("KGCHAT_EXTRACTION_CONCURRENCY", 2)
# Whether extraction guided by the mentions is asked of the offline default (issue #48 item 6,
# ``extraction/compact.py``): relationships by source, no entity list, the types read from the graph's
# relationship types and the mention index's links. On by default: measured on ``make eval --set
# extraction`` (docs/evals.md, 2026-12-07).
KGCHAT_EXTRACTION_GUIDED = env_bool("KGCHAT_EXTRACTION_GUIDED", True)
# Largest tool result (JSON characters) sent to the model; longer lists are halved until it fits.
KGCHAT_TOOL_RESULT_MAX_CHARS = env_int("KGCHAT_TOOL_RESULT_MAX_CHARS", 40_000)
# Largest tool result sent to browsers in an mcp_tool frame (the audit trail keeps it whole).
KGCHAT_FRAME_RESULT_MAX_CHARS = env_int("KGCHAT_FRAME_RESULT_MAX_CHARS", 200_000)
# Turns a user may start per minute (across all processes); 0 disables the limit.
KGCHAT_TURNS_PER_MINUTE = env_int("KGCHAT_TURNS_PER_MINUTE", 30)
# A turn running longer than this is stopped with an error frame of code "timeout".
KGCHAT_TURN_TIMEOUT_SECONDS = env_int("KGCHAT_TURN_TIMEOUT_SECONDS", 300)
# The lease of a running turn (seconds): its process renews it every third of this; once it has
# lapsed (the process died) another process takes the turn over and resumes it. A user waits about this long.
KGCHAT_TURN_LEASE_SECONDS = env_int("KGCHAT_TURN_LEASE_SECONDS", 6)
# How many processes may run one turn (the first, then one per resumption after its process died);
# a turn whose process died that often ends with an error frame of code "turn_failed_repeatedly".
KGCHAT_TURN_MAX_ATTEMPTS = env_int("KGCHAT_TURN_MAX_ATTEMPTS", 3)
# Model text deltas arriving within this many milliseconds of the last one streamed are merged into
# one (the first goes out at once); 0 streams every delta on its own. See apps/agents/adk/model_adapter.py.
KGCHAT_STREAM_COALESCE_MS = env_int("KGCHAT_STREAM_COALESCE_MS", 20)
# A graph tool call running longer than this answers the model {"error", "code": "timeout"}.
KGCHAT_TOOL_TIMEOUT_SECONDS = env_int("KGCHAT_TOOL_TIMEOUT_SECONDS", 30)
# How long a project invitation link stays valid when its owner does not say (hours; 7 days).
KGCHAT_INVITATION_TTL_HOURS = env_int("KGCHAT_INVITATION_TTL_HOURS", 7 * 24)
# The address people open kgchat at (scheme and host, e.g. "https://kgchat.example.org"): the links
# /v1 answers carry to kgchat's pages. Empty: the address the client called, which is wrong when a
# chat UI calls kgchat by an address its users' browsers do not reach (Docker's host.docker.internal).
KGCHAT_PUBLIC_URL = os.environ.get("KGCHAT_PUBLIC_URL", "").strip().rstrip("/")
# Graph write tools called directly (REST tool route, MCP) have no approval step: off, they answer
# "approval_required"; on, an editor's or owner's call is its own approval (audited as "direct").
KGCHAT_DIRECT_WRITES = env_bool("KGCHAT_DIRECT_WRITES", False)
# How long a write an agent proposed waits for a decision before it expires.
KGCHAT_APPROVAL_TTL_MINUTES = env_int("KGCHAT_APPROVAL_TTL_MINUTES", 60)
# MCP servers agent definitions may use (apps/agents/mcp_servers.py); both empty: none.
# Stdio servers by name, as JSON: {"<name>": {"command": "…", "args": […], "env": {…}}}.
try:
    KGCHAT_MCP_STDIO_SERVERS = json.loads(os.environ.get("KGCHAT_MCP_STDIO_SERVERS") or "{}")
except json.JSONDecodeError as exc:
    raise ImproperlyConfigured(f"KGCHAT_MCP_STDIO_SERVERS is not valid JSON: {exc}") from None
# Prices per million tokens by model name, as JSON: {"<model>": {"input": 0.1, "output": 0.4}}
# (apps/chat/usage.py). A model not listed shows its tokens and no cost.
try:
    KGCHAT_MODEL_PRICES = json.loads(os.environ.get("KGCHAT_MODEL_PRICES") or "{}")
except json.JSONDecodeError as exc:
    raise ImproperlyConfigured(f"KGCHAT_MODEL_PRICES is not valid JSON: {exc}") from None
# HTTP servers: hosts, optionally with a port ("mcp.example.com,127.0.0.1:8765"), comma-separated.
KGCHAT_MCP_URL_ALLOWLIST = [
    h.strip() for h in os.environ.get("KGCHAT_MCP_URL_ALLOWLIST", "").split(",") if h.strip()
]
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "")
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
OLLAMA_BASE_URL = os.environ.get("OLLAMA_BASE_URL", "http://127.0.0.1:11434/v1")
# Off: openai/ models get the small-model agent loop (schema-forced first step) instead of native tools.
OPENAI_NATIVE_TOOLS = os.environ.get("OPENAI_NATIVE_TOOLS", "1").lower() not in {"0", "false", "no"}
# The small-model loop (models without native tool calls: ``local/…``, ``OPENAI_NATIVE_TOOLS=0``) plans a
# turn as one path query when the agent offers ``query_paths``; off (``0``), it keeps its earlier
# search-and-look-up recipe and does not see ``query_paths``. On by default: planned,
# the offline default scored at least as well on every kind and MetaQA hop (docs/evals.md).
KGCHAT_SMALL_MODEL_PLANS = env_bool("KGCHAT_SMALL_MODEL_PLANS", True)
# Where `make run` serves the offline default (local/<model>): one llama.cpp server on loopback.
KGCHAT_LOCAL_LLM_URL = f"http://127.0.0.1:{env_int('KGCHAT_LOCAL_LLM_PORT', 8012)}/v1"
# The key that server wants (a Bearer token): scripts/local_llm.sh makes this file once, mode 0600.
KGCHAT_LOCAL_LLM_KEY_FILE = os.environ.get("KGCHAT_LOCAL_LLM_KEY_FILE") or str(
    BASE_DIR / ".data" / "llm" / "api_key"
)
GOOGLE_API_KEY = os.environ.get("GOOGLE_API_KEY", "")

DATA_UPLOAD_MAX_MEMORY_SIZE = KGCHAT_IMPORT_MAX_BYTES
# Django's two (memory, then a temporary file), behind one that keeps each file's name whole:
# Django cuts an upload's name to 255 characters, a document's name may have 300 (#47).
FILE_UPLOAD_HANDLERS = [
    "apps.core.uploads.ClientFileNames",
    "django.core.files.uploadhandler.MemoryFileUploadHandler",
    "django.core.files.uploadhandler.TemporaryFileUploadHandler",
]

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("KGCHAT_LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
    },
}
