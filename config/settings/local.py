"""`make run` on one machine: the embedded database, in-process channels, static files served.

DEBUG stays off unless DJANGO_DEBUG=1: a user of `make run` never sees a traceback.
"""

from .base import *  # noqa: F403
