"""Read an uploaded file as text: plain text, Markdown, HTML (text only), PDF (``pypdf``), Word,
PowerPoint, Excel and CSV (``office.py``), and images and scanned PDF pages by OCR (``ocr.py``).

Nothing here fetches anything: HTML is read with the standard library's ``html.parser`` and what it
links to (images, stylesheets, frames, hrefs) is never opened. PDFs are read by ``pypdf``, pure
Python; a page with no text layer is read by OCR from its images (``pypdf`` gives them). Every
failure is a ``DocumentError`` with its own code.
"""

from __future__ import annotations

import io
import logging
import re
import zipfile
from collections.abc import Callable
from html.parser import HTMLParser
from typing import TYPE_CHECKING

from apps.documents import office
from apps.documents.errors import (
    DocumentCorrupt,
    DocumentEncrypted,
    DocumentTooManyPages,
    DocumentWithoutText,
    UnsupportedDocumentType,
)
from apps.documents.models import DocumentFormat
from apps.documents.ocr import PDF_IMAGE_FORMATS, OcrText, image_text
from apps.documents.parsed import (
    PageSpan,
    ParsedDocument,
    ParseLimits,
    TextBuilder,
    block_clean,
    normalise,
)

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
    ".docx": DocumentFormat.DOCX,
    ".pptx": DocumentFormat.PPTX,
    ".xlsx": DocumentFormat.XLSX,
    ".csv": DocumentFormat.CSV,
    ".png": DocumentFormat.IMAGE,
    ".jpg": DocumentFormat.IMAGE,
    ".jpeg": DocumentFormat.IMAGE,
}
CONTENT_TYPES = {
    "text/plain": DocumentFormat.TEXT,
    "text/markdown": DocumentFormat.MARKDOWN,
    "text/x-markdown": DocumentFormat.MARKDOWN,
    "text/html": DocumentFormat.HTML,
    "application/xhtml+xml": DocumentFormat.HTML,
    "application/pdf": DocumentFormat.PDF,
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": DocumentFormat.DOCX,
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": DocumentFormat.PPTX,
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": DocumentFormat.XLSX,
    "text/csv": DocumentFormat.CSV,
    "image/png": DocumentFormat.IMAGE,
    "image/jpeg": DocumentFormat.IMAGE,
}
# An Office Open XML file is a zip; the part that names its kind.
ZIP_PARTS = {
    "word/document.xml": DocumentFormat.DOCX,
    "ppt/presentation.xml": DocumentFormat.PPTX,
    "xl/workbook.xml": DocumentFormat.XLSX,
}
OFFICE = frozenset({DocumentFormat.DOCX, DocumentFormat.PPTX, DocumentFormat.XLSX})
# An OLE compound file: an old binary Office file, or an Office Open XML file encrypted with a password.
_CFB = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_SUPPORTED = (
    "upload plain text (.txt), Markdown (.md), HTML (.html), PDF (.pdf), Word (.docx), "
    "PowerPoint (.pptx), Excel (.xlsx), CSV (.csv) or an image (.png, .jpg)"
)


def _signature_format(data: bytes) -> str | None:
    """The format the file's first bytes declare, if they declare one."""
    if data.lstrip()[:5] == b"%PDF-":
        return DocumentFormat.PDF
    if data.startswith(b"\x89PNG\r\n\x1a\n") or data.startswith(b"\xff\xd8\xff"):
        return DocumentFormat.IMAGE
    if data.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                names = set(archive.namelist())
        except (zipfile.BadZipFile, OSError, ValueError, EOFError):
            return None  # a damaged zip: its name says what it was meant to be
        return next((found for part, found in ZIP_PARTS.items() if part in names), None)
    return None


def format_detect(*, filename: str, content_type: str, data: bytes) -> str:
    """The document's format from its bytes (a PDF's, an image's or an Office file's signature), its
    name's extension or its declared type."""
    found = _signature_format(data)
    if found is not None:
        return found
    lowered = filename.lower()
    by_name = next((f for extension, f in EXTENSIONS.items() if lowered.endswith(extension)), None)
    if data.startswith(_CFB):
        if by_name in OFFICE or b"E\x00n\x00c\x00r\x00y\x00p\x00t\x00i\x00o\x00n" in data[:65536]:
            raise DocumentEncrypted(
                f"{filename or 'the file'} is encrypted (it asks for a password to open): "
                "upload an unprotected copy"
            )
        raise UnsupportedDocumentType(
            f"{filename or 'the file'} is an old binary Office file (.doc, .xls, .ppt): save it as "
            ".docx, .xlsx or .pptx and upload that"
        )
    if by_name is not None:
        return by_name
    declared = CONTENT_TYPES.get(content_type.split(";")[0].strip().lower())
    if declared is not None:
        return declared
    raise UnsupportedDocumentType(f"{filename or 'the file'} is not a supported document: {_SUPPORTED}")


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


def _pdf_page_texts(reader: PdfReader, count: int) -> list[str]:
    texts = []
    for number in range(count):
        try:
            page_text = reader.pages[number].extract_text() or ""
        except Exception as exc:  # a damaged content stream: pypdf raises many kinds
            raise DocumentCorrupt(f"page {number + 1} of the PDF could not be read: {exc}") from None
        texts.append(normalise(page_text.replace("\x00", "")).strip())
    return texts


def _pdf_page_ocr(reader: PdfReader, number: int, languages: str) -> OcrText:
    """A page without a text layer read by OCR from its images (a scanner's page is one image)."""
    try:
        images = [image.data for image in reader.pages[number - 1].images]
    except Exception as exc:  # an image pypdf cannot decode (JBIG2 without jbig2dec, a damaged stream)
        raise DocumentCorrupt(f"the images of page {number} of the PDF could not be read: {exc}") from None
    found = [image_text(image, languages=languages, formats=PDF_IMAGE_FORMATS) for image in images]
    words = sum(f.words for f in found)
    confidence = sum((f.confidence or 0) * f.words for f in found) / words if words else None
    return OcrText(
        paragraphs=[p for f in found for p in f.paragraphs],
        confidence=round(confidence, 4) if confidence is not None else None,
        words=words,
    )


def pdf_read(data: bytes, *, limits: ParseLimits) -> ParsedDocument:
    """A PDF's text, page by page (pages joined by a blank line), with where each page's text lies;
    a page without a text layer is read by OCR (at most ``limits.ocr_pages`` of them)."""
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
    if count > limits.pages:
        raise DocumentTooManyPages(f"the PDF has {count} pages; at most {limits.pages} are accepted")
    texts = _pdf_page_texts(reader, count)
    blank = [number + 1 for number, text in enumerate(texts) if not text]
    if len(blank) > limits.ocr_pages:
        raise DocumentTooManyPages(
            f"the PDF has {len(blank)} pages without a text layer; at most {limits.ocr_pages} are read by OCR"
        )
    read = {number: _pdf_page_ocr(reader, number, limits.ocr_languages) for number in blank}
    parts: list[str] = []
    spans: list[PageSpan] = []
    offset = 0
    for number, page_text in enumerate(texts, start=1):
        ocr = read.get(number)
        if ocr is not None:
            page_text = "\n\n".join(p for p in (block_clean(p) for p in ocr.paragraphs) if p)
        if not page_text:
            continue
        if parts:
            offset += 2  # the blank line between pages
        confidence = ocr.confidence if ocr is not None else None
        spans.append(
            PageSpan(page=number, start=offset, end=offset + len(page_text), ocr_confidence=confidence)
        )
        parts.append(page_text)
        offset += len(page_text)
    if not parts:
        raise DocumentWithoutText(
            f"the PDF has {count} page(s), no text layer, and OCR found no text on them"
        )
    return ParsedDocument(
        format=DocumentFormat.PDF, text="\n\n".join(parts), page_count=count, pages=tuple(spans)
    )


def image_read(data: bytes, *, limits: ParseLimits) -> ParsedDocument:
    """An image's text by OCR, as one page read with the engine's confidence."""
    found = image_text(data, languages=limits.ocr_languages)
    builder = TextBuilder()
    builder.page(1, found.paragraphs, ocr_confidence=found.confidence)
    return builder.build(format=DocumentFormat.IMAGE, page_count=1, empty="OCR found no text in the image")


def document_parse(*, format: str, data: bytes, limits: ParseLimits) -> ParsedDocument:
    """Read ``data`` in ``format`` as text; raise a ``DocumentError`` for a file that cannot be read."""
    if format == DocumentFormat.PDF:
        if data.lstrip()[:5] != b"%PDF-":
            raise DocumentCorrupt("the file is named as a PDF but is not one (no %PDF- header)")
        return pdf_read(data, limits=limits)
    readers: dict[str, Callable[..., ParsedDocument]] = {
        DocumentFormat.DOCX: office.docx_read,
        DocumentFormat.PPTX: office.pptx_read,
        DocumentFormat.XLSX: office.xlsx_read,
        DocumentFormat.IMAGE: image_read,
    }
    if format in readers:
        return readers[format](data, limits=limits)
    if format == DocumentFormat.CSV:
        return office.csv_read(_decode(data, "CSV file"), limits=limits)
    if format == DocumentFormat.HTML:
        text = html_text(_decode(data, "HTML file"))
    else:
        text = _decode(data, "text file")
    text = normalise(text).strip()
    if not text:
        raise DocumentWithoutText("the document holds no text")
    return ParsedDocument(format=format, text=text)
