"""The production deployment files (docker-compose.yml, Dockerfile, deploy/): parsed and cross-checked.

Docker does not run here; these checks catch the mistakes that would only show at ``docker compose up``.
"""

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def app_services(services: dict) -> dict:
    return {
        name: s
        for name, s in services.items()
        if "daphne" in str(s.get("command", "")) or name.startswith("app")
    }


def test_compose_has_postgres_with_pgvector_redis_and_two_app_processes():
    services = compose()["services"]

    apps = app_services(services)

    assert services["db"]["image"] == "pgvector/pgvector:pg17"
    assert services["redis"]["image"].startswith("redis:")
    assert len(apps) >= 2
    for name, app in apps.items():
        env = app["environment"]
        assert app["build"] == ".", name
        assert env["DJANGO_SETTINGS_MODULE"] == "config.settings.production", name
        assert env["REDIS_URL"] == "redis://redis:6379/0", name
        assert env["DATABASE_URL"].endswith("@db:5432/kgchat"), name
        assert app["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}, name
        assert app["depends_on"]["db"] == {"condition": "service_healthy"}, name


def test_migrations_run_once_before_the_apps_start():
    services = compose()["services"]

    migrate = services["migrate"]

    assert "python manage.py migrate --noinput" in " ".join(migrate["command"])
    assert migrate["restart"] == "no"
    assert migrate["depends_on"] == {"db": {"condition": "service_healthy"}}
    assert migrate["environment"]["DJANGO_SETTINGS_MODULE"] == "config.settings.production"


def test_secrets_come_from_the_environment_and_are_required():
    text = (ROOT / "Dockerfile").read_text()
    services = compose()["services"]

    env = services["app1"]["environment"]

    assert env["DJANGO_SECRET_KEY"].startswith("${DJANGO_SECRET_KEY:?")
    assert "${POSTGRES_PASSWORD:?" in env["DATABASE_URL"]
    assert services["db"]["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    for name, service in services.items():
        for key, value in (service.get("environment") or {}).items():
            if re.search(r"SECRET|PASSWORD|API_KEY", key):
                assert str(value).startswith("${"), f"{name}.{key} is written in the file"
    assert ".env" in (ROOT / ".dockerignore").read_text().split() or "COPY . ." not in text


def test_the_front_proxies_every_app_process_and_serves_the_collected_static_files():
    services = compose()["services"]
    caddyfile = (ROOT / "deploy" / "Caddyfile").read_text()

    caddy = services["caddy"]

    for name in app_services(services):
        assert f"{name}:8000" in caddyfile
    assert "./deploy/Caddyfile:/etc/caddy/Caddyfile:ro" in caddy["volumes"]
    assert "static:/srv/static:ro" in caddy["volumes"]
    assert "root * {$KGCHAT_STATIC_ROOT:/srv/static}" in caddyfile
    assert "static:/app/.data/staticfiles" in services["migrate"]["volumes"]


def test_dockerfile_installs_the_pinned_dependencies_on_python_311_slim():
    dockerfile = (ROOT / "Dockerfile").read_text()

    assert "\nFROM python:3.11-slim\n" in dockerfile
    assert "-c constraints.txt" in dockerfile
    assert "USER kgchat" in dockerfile
    assert '"config.asgi:application"' in dockerfile


def test_env_example_names_every_variable_compose_requires():
    text = (ROOT / "docker-compose.yml").read_text()
    example = (ROOT / "deploy" / "env.example").read_text()

    required = set(re.findall(r"\$\{(\w+):\?", text))

    assert required == {"DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS", "POSTGRES_PASSWORD"}
    for name in required:
        assert re.search(rf"^{name}=", example, re.MULTILINE), name
