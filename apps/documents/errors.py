"""The errors of a document upload: each a 4xx with its own code, and nothing is stored."""

from __future__ import annotations

from apps.core.errors import NotFound, ServiceError


class DocumentError(ServiceError):
    """The document could not be read; nothing of it was stored."""

    code = "unreadable_document"


class UnsupportedDocumentType(DocumentError):
    status = 415
    code = "unsupported_document_type"


class DocumentTooLarge(DocumentError):
    status = 413
    code = "document_too_large"


class DocumentTooManyPages(DocumentError):
    status = 413
    code = "document_too_many_pages"


class DocumentTooManySheets(DocumentError):
    status = 413
    code = "document_too_many_sheets"


class DocumentTooManyRows(DocumentError):
    status = 413
    code = "document_too_many_rows"


class OcrUnavailable(DocumentError):
    """The server cannot read images: its OCR engine (Debian's ``tesseract-ocr``) is not installed."""

    status = 503
    code = "ocr_unavailable"


class DocumentEncrypted(DocumentError):
    code = "document_encrypted"


class DocumentCorrupt(DocumentError):
    code = "document_corrupt"


class DocumentWithoutText(DocumentError):
    code = "document_without_text"


class DocumentNotFound(NotFound):
    code = "document_not_found"
