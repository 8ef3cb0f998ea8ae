"""Split a document's text into passages: one per paragraph, a long paragraph cut between sentences.

A passage depends only on its own paragraph, so editing one paragraph changes one passage (or the
few a long one is cut into) and a re-upload re-processes only those (``services.document_upload``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from apps.documents.parsed import PageSpan

# The longest passage: a paragraph longer than this is cut at sentence ends (or, failing those,
# at spaces) into pieces of at most this many characters.
MAX_PASSAGE_CHARS = 1500

_PARAGRAPH = re.compile(r"\n[ \t]*\n+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class PassageSpan:
    ordinal: int
    text: str
    start: int
    end: int
    page: int | None
    content_hash: str
    ocr_confidence: float | None = None


def passage_hash(text: str) -> str:
    """SHA-256 of a passage's text, whitespace runs counted as one space (a PDF's reflow aside)."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()


def _pieces(text: str, start: int, limit: int) -> list[tuple[int, int]]:
    """Cut ``text`` (at ``start`` in the document) into (start, end) pieces of at most ``limit``."""
    if len(text) <= limit:
        return [(start, start + len(text))]
    pieces: list[tuple[int, int]] = []
    cuts = [m.end() for m in _SENTENCE_END.finditer(text)]
    begin = 0
    while len(text) - begin > limit:
        candidates = [c for c in cuts if begin < c <= begin + limit]
        if not candidates:
            space = text.rfind(" ", begin + 1, begin + limit)
            candidates = [space + 1] if space > begin else [begin + limit]
        cut = candidates[-1]
        piece = text[begin:cut].rstrip()
        pieces.append((start + begin, start + begin + len(piece)))
        begin = cut
        while begin < len(text) and text[begin].isspace():
            begin += 1
    if begin < len(text):
        pieces.append((start + begin, start + len(text)))
    return pieces


def _page_at(pages: tuple[PageSpan, ...], offset: int) -> PageSpan | None:
    for span in pages:
        if span.start <= offset < span.end:
            return span
    return None


def passages_split(
    text: str, *, pages: tuple[PageSpan, ...] = (), limit: int = MAX_PASSAGE_CHARS
) -> list[PassageSpan]:
    """The passages of ``text`` in order, with their offsets, page (PDFs, slides), content hash and,
    for a page read by OCR, its confidence."""
    paragraphs: list[tuple[int, int]] = []
    position = 0
    for match in _PARAGRAPH.finditer(text):
        paragraphs.append((position, match.start()))
        position = match.end()
    paragraphs.append((position, len(text)))
    # A PDF's pages never share a passage: a paragraph running over a page break is cut there.
    if pages:
        split: list[tuple[int, int]] = []
        for start, end in paragraphs:
            for span in pages:
                lo, hi = max(start, span.start), min(end, span.end)
                if lo < hi:
                    split.append((lo, hi))
        paragraphs = split
    found: list[PassageSpan] = []
    for start, end in paragraphs:
        chunk = text[start:end]
        stripped = chunk.strip()
        if not stripped:
            continue
        start += len(chunk) - len(chunk.lstrip())
        for piece_start, piece_end in _pieces(stripped, start, limit):
            piece = text[piece_start:piece_end]
            page = _page_at(pages, piece_start) if pages else None
            found.append(
                PassageSpan(
                    ordinal=len(found),
                    text=piece,
                    start=piece_start,
                    end=piece_end,
                    page=page.page if page is not None else None,
                    content_hash=passage_hash(piece),
                    ocr_confidence=page.ocr_confidence if page is not None else None,
                )
            )
    return found
