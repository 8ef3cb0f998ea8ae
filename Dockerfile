# kgchat for production: daphne serving config.asgi, settings config.settings.production.
# Built by docker-compose.yml; see the README's "Production" section.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=config.settings.production

WORKDIR /app

# The OCR engine of uploaded scans and images (apps/documents/ocr.py) and its English model.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tesseract-ocr tesseract-ocr-eng \
    && rm -rf /var/lib/apt/lists/*

# The pinned dependencies first (a layer that survives code changes), exactly as constraints.txt resolves them.
COPY pyproject.toml constraints.txt ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" \
        > /tmp/requirements.txt \
    && pip install -r /tmp/requirements.txt -c constraints.txt \
    && rm /tmp/requirements.txt

COPY . .
RUN useradd --system --home-dir /app --shell /usr/sbin/nologin kgchat \
    && mkdir -p /app/.data/staticfiles \
    && chown -R kgchat /app/.data
USER kgchat

EXPOSE 8000
CMD ["daphne", "-b", "0.0.0.0", "-p", "8000", "--proxy-headers", "config.asgi:application"]
