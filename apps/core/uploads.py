"""The name of an uploaded file as the client sent it, not cut to 255 characters.

Django shortens an ``UploadedFile``'s name to 255 characters (``UploadedFile._set_name``, for file
systems that allow no longer), keeping its extension. kgchat writes no uploaded file to disk: a
document's name is its file's name, up to its own documented limit (300), and one over that limit
is refused, not cut. ``ClientFileNames``, the first of ``FILE_UPLOAD_HANDLERS``, records each file
part's name as Django's parser read it (folders and unprintable characters already removed, the
name still whole) and passes the bytes on untouched to Django's own handlers.
"""

from __future__ import annotations

from typing import Any

from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpRequest

_NAMES = "_kgchat_client_file_names"


class ClientFileNames(FileUploadHandler):
    """Records ``{field: [file names]}`` on the request; stores nothing, returns no file."""

    def new_file(self, field_name: str, file_name: str, *args: Any, **kwargs: Any) -> None:
        super().new_file(field_name, file_name, *args, **kwargs)
        names: dict[str, list[str]] = self.request.__dict__.setdefault(_NAMES, {})
        names.setdefault(field_name, []).append(file_name)

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None


def client_file_name(request: HttpRequest, field: str, file: UploadedFile) -> str:
    """The whole name the client gave ``file``, uploaded in the multipart field ``field``.

    The recorded name Django would have shortened to ``file.name`` (the last, as ``request.FILES``
    gives the last file of a field); ``file.name`` when none was recorded.
    """
    recorded = getattr(request, _NAMES, {}).get(field, [])
    for name in reversed(recorded):
        if UploadedFile(name=name).name == file.name:
            return str(name)
    return file.name or ""
