import os

from .base import *  # noqa: F403
from .base import STATIC_ROOT, env_bool, env_int

DEBUG = False
SECRET_KEY = os.environ["DJANGO_SECRET_KEY"]
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
# Browsers keep Secure cookies only from HTTPS sites (and localhost): the plain-HTTP trial
# (README, "Production") turns them off, or nobody could log in.
SESSION_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", True)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_CONTENT_TYPE_NOSNIFF = True
KGCHAT_SERVE_STATIC = env_bool("KGCHAT_SERVE_STATIC", False)
# Where collectstatic writes the files the web server in front serves (compose: a shared volume).
STATIC_ROOT = os.environ.get("DJANGO_STATIC_ROOT") or STATIC_ROOT
