"""The base of every error a service raises on purpose. Transports map these once, to their medium."""

from __future__ import annotations


class ServiceError(Exception):
    """A request that cannot be served; ``status`` and ``code`` are what REST and frames show."""

    status: int = 400
    code: str = "invalid_request"

    def __init__(self, message: str = "", *, code: str | None = None, status: int | None = None) -> None:
        super().__init__(message or self.__class__.__doc__ or self.code)
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status

    @property
    def message(self) -> str:
        return str(self.args[0]) if self.args else self.code


class NotFound(ServiceError):
    """Not found."""

    status = 404
    code = "not_found"


class PermissionDenied(ServiceError):
    """You are not allowed to do that."""

    status = 403
    code = "forbidden"
