"""What reading a file gives: its text, and where each page's (or slide's) text lies in it.

Every reader (``parsing.py``, ``office.py``, ``ocr.py``) builds its text with ``TextBuilder``: blocks
joined by a blank line, so each block becomes a passage (``passages.py``), and pages joined the same
way with their spans recorded, so no passage is shared by two pages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from apps.documents.errors import DocumentWithoutText


@dataclass(frozen=True)
class PageSpan:
    """Where a page's text lies in the document's text (1-based page or slide number); a page read by
    OCR has the engine's mean word confidence (0 to 1)."""

    page: int
    start: int
    end: int
    ocr_confidence: float | None = None


@dataclass(frozen=True)
class ParsedDocument:
    format: str
    text: str
    page_count: int | None = None
    pages: tuple[PageSpan, ...] = ()


@dataclass(frozen=True)
class ParseLimits:
    """The most a file may hold: pages (a PDF's, a presentation's slides), pages read by OCR, a
    workbook's sheets, a table's rows (all sheets together); and the OCR engine's languages."""

    pages: int = 500
    ocr_pages: int = 50
    sheets: int = 50
    rows: int = 20000
    ocr_languages: str = "eng"


def normalise(text: str) -> str:
    """Unix line ends, no trailing spaces on a line."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return re.sub(r"[ \t]+\n", "\n", text)


def block_clean(text: str) -> str:
    """A block's text on lines of its own: no blank line inside it (it is one passage)."""
    return re.sub(r"\n\s*\n+", "\n", normalise(text.replace("\x00", ""))).strip()


def with_context(context: str, text: str) -> str:
    """``text`` under the heading (or slide title, or sheet) it belongs to, on the line above it."""
    return f"{context}\n{text}" if context and text != context else text


class TextBuilder:
    """Collect a document's blocks, page by page where it has pages."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.spans: list[PageSpan] = []
        self._offset = 0

    def _add(self, text: str) -> int:
        if self.parts:
            self._offset += 2  # the blank line between blocks
        start = self._offset
        self.parts.append(text)
        self._offset += len(text)
        return start

    def block(self, text: str) -> None:
        cleaned = block_clean(text)
        if cleaned:
            self._add(cleaned)

    def page(self, number: int, blocks: list[str], *, ocr_confidence: float | None = None) -> None:
        """One page's blocks, recorded as the page's span (a page with no text is left out)."""
        cleaned = [b for b in (block_clean(b) for b in blocks) if b]
        if not cleaned:
            return
        start = self._add("\n\n".join(cleaned))
        self.spans.append(PageSpan(page=number, start=start, end=self._offset, ocr_confidence=ocr_confidence))

    def build(self, *, format: str, page_count: int | None = None, empty: str) -> ParsedDocument:
        """The document; ``DocumentWithoutText(empty)`` when no block held text."""
        if not self.parts:
            raise DocumentWithoutText(empty)
        return ParsedDocument(
            format=format, text="\n\n".join(self.parts), page_count=page_count, pages=tuple(self.spans)
        )


def row_text(headers: list[str], values: list[str]) -> str:
    """A table's row as ``Header: value`` pairs (``Supplier: Acme; Q3 cost: 1200``), empty cells left out."""
    pairs = []
    for index, value in enumerate(values):
        value = " ".join(value.split())
        if not value:
            continue
        header = headers[index] if index < len(headers) and headers[index] else f"Column {index + 1}"
        pairs.append(f"{header}: {value}" if header != value else value)
    return "; ".join(pairs)
