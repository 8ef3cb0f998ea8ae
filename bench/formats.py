"""Documents people really have (#50 item 2): OCR seconds per page, and passages per second of each
format through the real upload path (``document_upload``: read, split, store, index mentions).

Each file is built here: a Word report of headed paragraphs and a table, a presentation of slides
with bullets and a table, a workbook of two sheets, a CSV file, and scanned pages (A4 at 150 dpi,
``BENCH_OCR_LINES`` lines of text drawn by Pillow) as PNG images and as one scanned PDF, read by
OCR (Debian's tesseract-ocr, one thread). Uploaded into a throw-away project, deleted at the end.

    BENCH_ROWS=2000 BENCH_OCR_PAGES=4 python -m bench formats
"""

from __future__ import annotations

import io
import os
import random
import time
import uuid

from django.contrib.auth import get_user_model

from apps.documents.parsed import ParseLimits
from apps.documents.parsing import document_parse, format_detect
from apps.documents.passages import passages_split
from apps.documents.services import document_upload
from apps.projects.services import project_create

ROWS = int(os.environ.get("BENCH_ROWS", "2000"))
OCR_PAGES = int(os.environ.get("BENCH_OCR_PAGES", "4"))
OCR_LINES = int(os.environ.get("BENCH_OCR_LINES", "30"))
WORDS = "harbour crane pier tide lamp keeper supplier invoice repair tonnes copper steel north quay".split()


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 14))).capitalize() + "."


def _rows(rng: random.Random, count: int) -> list[tuple[str, int, int]]:
    return [(f"Supplier {n}", rng.randint(100, 5000), rng.randint(100, 5000)) for n in range(count)]


def docx_file(rng: random.Random) -> bytes:
    import docx

    document = docx.Document()
    for section in range(ROWS // 20):
        document.add_heading(f"Section {section}", level=1)
        for _ in range(5):
            document.add_paragraph(" ".join(_sentence(rng) for _ in range(3)))
    table = document.add_table(rows=0, cols=3)
    for row in [("Supplier", "Q3 cost", "Q4 cost"), *_rows(rng, ROWS // 4)]:
        for cell, value in zip(table.add_row().cells, row, strict=True):
            cell.text = str(value)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def pptx_file(rng: random.Random) -> bytes:
    import pptx

    deck = pptx.Presentation()
    for number in range(ROWS // 20):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Slide {number}"
        slide.placeholders[1].text_frame.text = "\n".join(_sentence(rng) for _ in range(4))
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def xlsx_file(rng: random.Random) -> bytes:
    import openpyxl

    workbook = openpyxl.Workbook()
    for index, title in enumerate(("Costs", "Forecast")):
        sheet = workbook.active if index == 0 else workbook.create_sheet()
        sheet.title = title
        for row in [("Supplier", "Q3 cost", "Q4 cost"), *_rows(rng, ROWS // 2)]:
            sheet.append(list(row))
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def csv_file(rng: random.Random) -> bytes:
    lines = ["Supplier,Q3 cost,Q4 cost", *(",".join(map(str, row)) for row in _rows(rng, ROWS))]
    return ("\n".join(lines) + "\n").encode()


def scanned_pages(rng: random.Random, count: int) -> list[bytes]:
    """A4 pages at 150 dpi, ``OCR_LINES`` lines of 11 pt-like text each, as PNG images."""
    from PIL import Image, ImageDraw, ImageFont

    pages = []
    font = ImageFont.load_default(size=24)
    for _ in range(count):
        image = Image.new("L", (1240, 1754), 255)
        draw = ImageDraw.Draw(image)
        for line in range(OCR_LINES):
            draw.text((110, 120 + line * 48), _sentence(rng)[:70], fill=0, font=font)
        out = io.BytesIO()
        image.save(out, "PNG")
        pages.append(out.getvalue())
    return pages


def scanned_pdf(pngs: list[bytes]) -> bytes:
    from PIL import Image

    images = [Image.open(io.BytesIO(png)).convert("L") for png in pngs]
    out = io.BytesIO()
    images[0].save(out, "PDF", resolution=150, save_all=True, append_images=images[1:])
    return out.getvalue()


def _measure(project, name: str, data: bytes) -> tuple[int, float, float]:
    """Passages, seconds to read and split, seconds of the whole upload (read, split, store, index)."""
    began = time.perf_counter()
    parsed = document_parse(
        format=format_detect(filename=name, content_type="", data=data),
        data=data,
        limits=ParseLimits(ocr_pages=1000, rows=10**6),
    )
    count = len(passages_split(parsed.text, pages=parsed.pages))
    read = time.perf_counter() - began
    began = time.perf_counter()
    document_upload(project=project, name=name, data=data)
    return count, read, time.perf_counter() - began


def run() -> None:
    rng = random.Random(50)
    tag = uuid.uuid4().hex[:8]
    owner = get_user_model().objects.create_user(f"bench-formats-{tag}")
    project = project_create(owner=owner, name=f"bench formats {tag}")
    pages = scanned_pages(rng, OCR_PAGES)
    files = {
        "report.docx": docx_file(rng),
        "deck.pptx": pptx_file(rng),
        "costs.xlsx": xlsx_file(rng),
        "costs.csv": csv_file(rng),
        "scan.png": pages[0],
        "scan.pdf": scanned_pdf(pages),
    }
    try:
        for name, data in files.items():
            count, read, upload = _measure(project, name, data)
            line = (
                f"{name:<12} {len(data) / 1024:>7.0f} KiB, {count:>5} passages: read and split in {read:.2f} s "
                f"({count / read:.0f} passages/s), whole upload {upload:.2f} s ({count / upload:.0f} passages/s)"
            )
            if name.startswith("scan"):
                scanned = 1 if name.endswith(".png") else len(pages)
                line += f"; OCR {upload / scanned:.2f} s/page ({scanned} page(s) of {OCR_LINES} lines)"
            print(line, flush=True)
    finally:
        project.delete()
        owner.delete()
