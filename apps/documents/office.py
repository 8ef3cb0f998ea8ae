"""Read Office files and tables: Word (``python-docx``), PowerPoint (``python-pptx``), Excel
(``openpyxl``) and CSV (the standard library).

Each library is imported here only (the import-linter "Vendor SDKs" contract), when a file of its
kind is uploaded. Chosen over ``markitdown``, which reads the same files through the same
libraries plus ``mammoth``, ``pandas`` and ``magika``'s model, and gives Markdown whose tables
would be parsed again to give each row its headers (#50).

A heading (or a slide's title, or a sheet's name) stays with its passages: every block under it
starts with it on a line of its own. A table becomes one block per row, each cell after its
column's header (``Supplier: Acme; Q3 cost: 1200``), so a search for a column's name and a value
finds the row.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import zipfile
from collections.abc import Iterable, Iterator
from typing import Any

from apps.documents.errors import (
    DocumentCorrupt,
    DocumentTooLarge,
    DocumentTooManyPages,
    DocumentTooManyRows,
    DocumentTooManySheets,
)
from apps.documents.models import DocumentFormat
from apps.documents.parsed import ParsedDocument, ParseLimits, TextBuilder, normalise, row_text, with_context

# The most an Office file may unpack to: its XML is read whole by the libraries (a zip bomb guard).
MAX_UNPACKED_BYTES = 400 * 1024 * 1024


def zip_check(data: bytes, what: str) -> None:
    """Refuse an Office file that is not a readable zip, or that unpacks to more than the limit."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise DocumentCorrupt(
            f"the {what} could not be read (it may be damaged or cut short): {exc}"
        ) from None
    if unpacked > MAX_UNPACKED_BYTES:
        raise DocumentTooLarge(
            f"the {what} unpacks to {unpacked} bytes; at most {MAX_UNPACKED_BYTES} are read"
        )


class RowCounter:
    """The rows read so far, against the limit (all of a file's tables together)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def add(self) -> None:
        self.count += 1
        if self.count > self.limit:
            raise DocumentTooManyRows(
                f"the file's tables have more than {self.limit} rows; at most {self.limit} are accepted"
            )


def cell_text(value: object) -> str:
    """A cell's value as text: whole numbers without ``.0``, dates in ISO form."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, dt.datetime) and value.time() == dt.time():
        return value.date().isoformat()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return " ".join(str(value).split())


def table_rows(rows: Iterable[list[str]], rows_seen: RowCounter) -> Iterator[str]:
    """A table's rows as ``Header: value`` texts; the first row with text is the headers."""
    headers: list[str] | None = None
    body = 0
    for values in rows:
        if not any(values):
            continue
        if headers is None:
            headers = values
            continue
        rows_seen.add()
        body += 1
        if values != headers:
            yield row_text(headers, values)
    if headers is not None and body == 0:
        yield row_text([], headers)  # a table of one row: its cells as they are


def _docx_heading_level(paragraph: Any) -> int | None:
    try:
        name = paragraph.style.name or ""
    except (AttributeError, KeyError, ValueError):
        return None
    if name == "Title":
        return 0
    if name.startswith("Heading"):
        level = name.removeprefix("Heading").strip()
        return int(level) if level.isdigit() else 1
    return None


def docx_read(data: bytes, *, limits: ParseLimits) -> ParsedDocument:
    """A Word document's paragraphs and tables in order, each under its heading."""
    import docx
    from docx.table import Table

    zip_check(data, "Word document")
    try:
        document = docx.Document(io.BytesIO(data))
        content = list(document.iter_inner_content())
    except Exception as exc:  # a damaged part: python-docx and lxml raise many kinds
        raise DocumentCorrupt(f"the Word document could not be read: {exc}") from None
    builder = TextBuilder()
    headings: list[tuple[int, str]] = []
    # A heading is a passage of its own only when nothing comes under it (its blocks start with it).
    pending = False
    rows_seen = RowCounter(limits.rows)
    for item in content:
        context = " › ".join(text for _, text in headings)
        if isinstance(item, Table):
            cells = ([cell_text(cell.text) for cell in row.cells] for row in item.rows)
            for row in table_rows(cells, rows_seen):
                builder.block(with_context(context, row))
                pending = False
            continue
        text = normalise(item.text).strip()
        level = _docx_heading_level(item)
        if not text:
            continue
        if level is None:
            builder.block(with_context(context, text))
            pending = False
            continue
        if pending:
            builder.block(context)
        headings = [(lvl, head) for lvl, head in headings if lvl < level] + [(level, text)]
        pending = True
    if pending:
        builder.block(" › ".join(text for _, text in headings))
    return builder.build(format=DocumentFormat.DOCX, empty="the Word document holds no text")


def _slide_blocks(slide: Any, rows_seen: RowCounter) -> list[str]:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    title_shape = slide.shapes.title
    title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None else ""
    blocks: list[str] = []
    shapes = list(slide.shapes)
    while shapes:
        shape = shapes.pop(0)
        if shape.shape_type == MSO_SHAPE_TYPE.GROUP:  # a group: its shapes in turn
            shapes[:0] = list(shape.shapes)
            continue
        if title_shape is not None and shape.shape_id == title_shape.shape_id:
            continue
        if getattr(shape, "has_table", False) and shape.has_table:
            cells = ([cell_text(cell.text) for cell in row.cells] for row in shape.table.rows)
            blocks += [with_context(title, row) for row in table_rows(cells, rows_seen)]
        elif shape.has_text_frame and shape.text_frame.text.strip():
            blocks.append(with_context(title, shape.text_frame.text))
    if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
        notes = slide.notes_slide.notes_text_frame.text.strip()
        if notes:
            blocks.append(with_context(title, f"Notes: {notes}"))
    return blocks or ([title] if title else [])


def pptx_read(data: bytes, *, limits: ParseLimits) -> ParsedDocument:
    """A presentation's slides as pages: each text box, table row and the notes under the slide's title."""
    import pptx

    zip_check(data, "PowerPoint file")
    try:
        slides = list(pptx.Presentation(io.BytesIO(data)).slides)
    except Exception as exc:  # a damaged part: python-pptx and lxml raise many kinds
        raise DocumentCorrupt(f"the PowerPoint file could not be read: {exc}") from None
    if len(slides) > limits.pages:
        raise DocumentTooManyPages(
            f"the presentation has {len(slides)} slides; at most {limits.pages} are accepted"
        )
    builder = TextBuilder()
    rows_seen = RowCounter(limits.rows)
    for number, slide in enumerate(slides, start=1):
        try:
            blocks = _slide_blocks(slide, rows_seen)
        except (AttributeError, KeyError, ValueError, TypeError) as exc:
            raise DocumentCorrupt(f"slide {number} of the PowerPoint file could not be read: {exc}") from None
        builder.page(number, blocks)
    return builder.build(
        format=DocumentFormat.PPTX, page_count=len(slides), empty="the presentation holds no text"
    )


def xlsx_read(data: bytes, *, limits: ParseLimits) -> ParsedDocument:
    """A workbook's sheets in order, each row a block under its sheet's name, cells after their headers."""
    import openpyxl

    zip_check(data, "Excel workbook")
    try:
        workbook = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except Exception as exc:  # openpyxl raises many kinds for a damaged workbook
        raise DocumentCorrupt(f"the Excel workbook could not be read: {exc}") from None
    try:
        sheets = workbook.worksheets
        if len(sheets) > limits.sheets:
            raise DocumentTooManySheets(
                f"the workbook has {len(sheets)} sheets; at most {limits.sheets} are accepted"
            )
        builder = TextBuilder()
        rows_seen = RowCounter(limits.rows)
        for sheet in sheets:
            cells = ([cell_text(value) for value in row] for row in sheet.iter_rows(values_only=True))
            try:
                for row in table_rows(cells, rows_seen):
                    builder.block(with_context(f"Sheet: {sheet.title}", row))
            except (KeyError, ValueError, TypeError, zipfile.BadZipFile) as exc:
                raise DocumentCorrupt(f"the sheet {sheet.title!r} could not be read: {exc}") from None
    finally:
        workbook.close()
    return builder.build(
        format=DocumentFormat.XLSX, page_count=len(sheets), empty="the workbook holds no values"
    )


def csv_read(text: str, *, limits: ParseLimits) -> ParsedDocument:
    """A CSV file's rows (comma, semicolon or tab separated), each cell after its column's header."""
    try:
        dialect: Any = csv.Sniffer().sniff(text[:8192], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    builder = TextBuilder()
    try:
        rows = ([cell_text(v) for v in row] for row in csv.reader(io.StringIO(text), dialect))
        for row in table_rows(rows, RowCounter(limits.rows)):
            builder.block(row)
    except csv.Error as exc:
        raise DocumentCorrupt(f"the CSV file could not be read: {exc}") from None
    return builder.build(format=DocumentFormat.CSV, empty="the CSV file holds no values")
