"""Read an uploaded file as text: plain text, Markdown, HTML (text only) and PDF (``pypdf``).

Nothing here fetches anything: HTML is read with the standard library's ``html.parser`` and what it
links to (images, stylesheets, frames, hrefs) is never opened. PDFs are read by ``pypdf``, pure
Python, with no system binary. Every failure is a ``DocumentError`` with its own code.
"""

from __future__ import annotations

import io
import logging
import re
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import TYPE_CHECKING

from apps.documents.errors import (
    DocumentCorrupt,
    DocumentEncrypted,
    DocumentTooManyPages,
    DocumentWithoutText,
    UnsupportedDocumentType,
)
from apps.documents.models import DocumentFormat

if TYPE_CHECKING:
    from pypdf import PdfReader

log = logging.getLogger("kgchat.documents")

EXTENSIONS = {
    ".txt": DocumentFormat.TEXT,
    ".text": DocumentFormat.TEXT,
    ".md": DocumentFormat.MARKDOWN,
    ".markdown": DocumentFormat.MARKDOWN,
    ".html": DocumentFormat.HTML,
    ".htm": DocumentFormat.HTML,
    ".pdf": DocumentFormat.PDF,
}
CONTENT_TYPES = {
    "text/plain": DocumentFormat.TEXT,
    "text/markdown": DocumentFormat.MARKDOWN,
    "text/x-markdown": DocumentFormat.MARKDOWN,
    "text/html": DocumentFormat.HTML,
    "application/xhtml+xml": DocumentFormat.HTML,
    "application/pdf": DocumentFormat.PDF,
}


@dataclass(frozen=True)
class PageSpan:
    """Where a PDF page's text lies in the document's text (1-based page number)."""

    page: int
    start: int
    end: int


@dataclass(frozen=True)
class ParsedDocument:
    format: str
    text: str
    page_count: int | None = None
    pages: tuple[PageSpan, ...] = ()


def format_detect(*, filename: str, content_type: str, data: bytes) -> str:
    """The document's format from its bytes (a PDF's signature), its name's extension or its declared type."""
    if data.lstrip()[:5] == b"%PDF-":
        return DocumentFormat.PDF
    lowered = filename.lower()
    for extension, found in EXTENSIONS.items():
        if lowered.endswith(extension):
            return found
    declared = CONTENT_TYPES.get(content_type.split(";")[0].strip().lower())
    if declared is not None:
        return declared
    raise UnsupportedDocumentType(
        f"{filename or 'the file'} is not a supported document: upload plain text (.txt), Markdown (.md), "
        "HTML (.html) or PDF (.pdf)"
    )


def _decode(data: bytes, what: str) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise DocumentCorrupt(
            f"the {what} is not UTF-8 text (invalid byte at position {exc.start}); save it as UTF-8"
        ) from None
    if "\x00" in text:
        raise DocumentCorrupt(f"the {what} holds NUL characters: it is not a text file")
    return text


def _normalise(text: str) -> str:
    """Unix line ends, no trailing spaces on a line, no lone surrogates."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return re.sub(r"[ \t]+\n", "\n", text)


# Elements whose text is not shown, and elements that start a new paragraph.
_HIDDEN = frozenset({"script", "style", "template", "noscript", "head", "svg", "math", "iframe", "object"})
_BLOCK = frozenset(
    {
        "p", "div", "section", "article", "aside", "header", "footer", "main", "nav", "h1", "h2", "h3",
        "h4", "h5", "h6", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr", "blockquote", "pre",
        "figure", "figcaption", "hr", "title", "body", "address", "details", "summary", "form",
    }
)  # fmt: skip


class _TextOnly(HTMLParser):
    """Collect an HTML page's visible text, one paragraph per block element."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self._current: list[str] = []
        self._hidden = 0
        self._title: list[str] = []
        self._in_title = False

    def _end_block(self) -> None:
        text = re.sub(r"\s+", " ", "".join(self._current)).strip()
        if text:
            self.blocks.append(text)
        self._current = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "title":
            self._in_title = True
        if tag in _HIDDEN:
            self._hidden += 1
        elif tag in _BLOCK:
            self._end_block()
        elif tag == "br":
            self._current.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if tag in _HIDDEN:
            self._hidden = max(0, self._hidden - 1)
        elif tag in _BLOCK:
            self._end_block()

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self._title.append(data)
        elif not self._hidden:
            self._current.append(data)

    def text(self) -> str:
        self._end_block()
        title = re.sub(r"\s+", " ", "".join(self._title)).strip()
        blocks = self.blocks
        if title and (not blocks or blocks[0] != title):
            blocks = [title, *blocks]
        return "\n\n".join(blocks)


def html_text(html: str) -> str:
    """The visible text of an HTML page, paragraphs separated by blank lines; nothing is fetched."""
    parser = _TextOnly()
    try:
        parser.feed(html)
        parser.close()
    except Exception as exc:  # html.parser is lenient; anything it still refuses is a corrupt file
        raise DocumentCorrupt(f"the HTML file could not be read: {exc}") from None
    return parser.text()


def _pdf_open_without_password(reader: PdfReader) -> None:
    """Decrypt an encrypted PDF as every viewer does, with the empty user password; refuse it as
    encrypted only when that does not open it (a real user password, or a security handler pypdf
    cannot use). An owner password alone (bank statements, exported reports) restricts printing or
    copying in viewers that honour it; it does not keep the text from a reader."""
    from pypdf import PasswordType
    from pypdf.errors import DependencyError, PyPdfError

    refused = "the PDF is encrypted (it asks for a password to open): upload an unprotected copy"
    try:
        opened = reader.decrypt("")
    except (DependencyError, NotImplementedError) as exc:  # an encryption pypdf cannot undo
        raise DocumentEncrypted(f"{refused} ({exc})") from None
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        raise DocumentCorrupt(f"the PDF's encryption could not be read: {exc}") from None
    if opened == PasswordType.NOT_DECRYPTED:
        raise DocumentEncrypted(refused)


def pdf_read(data: bytes, *, max_pages: int) -> ParsedDocument:
    """A PDF's text, page by page (pages joined by a blank line), with where each page's text lies."""
    # pypdf is imported here: only an upload of a PDF needs it.
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        encrypted = reader.is_encrypted
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as exc:
        raise DocumentCorrupt(f"the PDF could not be read (it may be damaged or cut short): {exc}") from None
    if encrypted:
        _pdf_open_without_password(reader)
    try:
        count = len(reader.pages)
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError) as exc:
        raise DocumentCorrupt(f"the PDF's pages could not be read: {exc}") from None
    if count > max_pages:
        raise DocumentTooManyPages(f"the PDF has {count} pages; at most {max_pages} are accepted")
    parts: list[str] = []
    spans: list[PageSpan] = []
    offset = 0
    for number in range(count):
        try:
            page_text = reader.pages[number].extract_text() or ""
        except Exception as exc:  # a damaged content stream: pypdf raises many kinds
            raise DocumentCorrupt(f"page {number + 1} of the PDF could not be read: {exc}") from None
        page_text = _normalise(page_text.replace("\x00", "")).strip()
        if not page_text:
            continue
        if parts:
            offset += 2  # the blank line between pages
        spans.append(PageSpan(page=number + 1, start=offset, end=offset + len(page_text)))
        parts.append(page_text)
        offset += len(page_text)
    text = "\n\n".join(parts)
    if not text.strip():
        raise DocumentWithoutText(
            f"the PDF has {count} page(s) but no text layer (a scanned image?): run OCR on it first"
        )
    return ParsedDocument(format=DocumentFormat.PDF, text=text, page_count=count, pages=tuple(spans))


def document_parse(*, format: str, data: bytes, max_pages: int) -> ParsedDocument:
    """Read ``data`` in ``format`` as text; raise a ``DocumentError`` for a file that cannot be read."""
    if format == DocumentFormat.PDF:
        if data.lstrip()[:5] != b"%PDF-":
            raise DocumentCorrupt("the file is named as a PDF but is not one (no %PDF- header)")
        return pdf_read(data, max_pages=max_pages)
    if format == DocumentFormat.HTML:
        text = html_text(_decode(data, "HTML file"))
    else:
        text = _decode(data, "text file")
    text = _normalise(text).strip()
    if not text:
        raise DocumentWithoutText("the document holds no text")
    return ParsedDocument(format=format, text=text)
