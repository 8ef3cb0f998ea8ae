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
export DJANGO_SETTINGS_MODULE ?= config.settings.local
export PYTHONUNBUFFERED := 1

.PHONY: run serve setup install db migrate demo stop test lint bench system-deps clean

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# Debian packages later parts need (redis-server for several processes, chromium for the page tests).
system-deps:
	@bash scripts/system_deps.sh

db: install
	@if [ -z "$$DATABASE_URL" ]; then $(PY) manage.py embedded_db start >/dev/null && echo "embedded PostgreSQL: $$($(PY) manage.py embedded_db status)"; fi

migrate: db
	$(PY) manage.py migrate --noinput

setup: migrate
	$(PY) manage.py bootstrap --demo-project demo

run: setup
	@echo "kgchat on http://$(HOST):$(PORT)/  (API docs: /api/docs, admin: /admin/)"
	$(VENV)/bin/daphne -b $(HOST) -p $(PORT) config.asgi:application

stop:
	@if [ -x $(PY) ]; then $(PY) manage.py embedded_db stop; fi

test: migrate system-deps
	DJANGO_SETTINGS_MODULE=config.settings.test $(VENV)/bin/pytest $(PYTEST_ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy apps
	$(VENV)/bin/lint-imports

bench: migrate
	DJANGO_SETTINGS_MODULE=config.settings.test $(PY) -m bench

clean: stop
	rm -rf $(VENV) .data
