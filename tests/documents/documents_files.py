"""Files for the document tests, built here: PDFs (text pages, an encrypted one, a scanned one), and
Word, PowerPoint, Excel and CSV files, scanned pages as PNG images and as a scanned PDF (#50)."""

from __future__ import annotations

import io


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def pdf_with_pages(pages: list[list[str]]) -> bytes:
    """A PDF whose page i shows the lines ``pages[i]`` in Helvetica (a text layer pypdf reads)."""
    objects: list[bytes] = []
    page_count = len(pages)
    # 1: catalog, 2: pages, 3: font, then a page and its content stream per page.
    kids = " ".join(f"{4 + 2 * i} 0 R" for i in range(page_count))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {page_count} >>".encode())
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    for i, lines in enumerate(pages):
        content = (
            "BT /F1 11 Tf 14 TL 72 740 Td " + " ".join(f"({_escape(line)}) Tj T*" for line in lines) + " ET"
        )
        stream = content.encode("latin-1")
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> "
            f"/Contents {5 + 2 * i} 0 R >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def pdf_encrypted(
    lines: tuple[str, ...] = ("A secret page.",), *, user_password: str = "secret", algorithm: str = "AES-128"
) -> bytes:
    """A PDF encrypted by ``pypdf``: ``user_password`` opens it (empty: any viewer opens it without
    asking, as for a bank statement restricted by an owner password only)."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(io.BytesIO(pdf_with_pages([list(lines)]))).pages:
        writer.add_page(page)
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm=algorithm)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def pdf_scanned(pages: int = 2) -> bytes:
    """A PDF of pages with no text layer, as a scanner without OCR makes."""
    from pypdf import PdfWriter

    writer = PdfWriter()
    for _ in range(pages):
        writer.add_blank_page(width=612, height=792)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


# Office files, tables and scans (#50), each built here with the library that reads it (or Pillow).

SUPPLIERS = [
    ("Supplier", "Q3 cost", "Q4 cost"),
    ("Acme", 1200, 800),
    ("Globex", 950, 1300),
    ("Initech", 400, 420),
]


def docx_report() -> bytes:
    """A Word report: a title, a heading with a paragraph, and a table of suppliers' costs under a heading."""
    import docx

    document = docx.Document()
    document.add_heading("Harbour supplies 2026", level=0)
    document.add_heading("Repairs", level=1)
    document.add_paragraph("The crane at pier 4 was repaired by Marta Lobo in September.")
    document.add_heading("Supplier costs", level=1)
    table = document.add_table(rows=0, cols=3)
    for row in SUPPLIERS:
        cells = table.add_row().cells
        for cell, value in zip(cells, row, strict=True):
            cell.text = str(value)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def pptx_deck() -> bytes:
    """A presentation of two slides: a title and bullets, then a title and a table."""
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Lighthouse restoration"
    slide.placeholders[1].text_frame.text = "The lamp was replaced in 2025.\nThe keeper is Ana Reis."
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = "Budget"
    table = slide.shapes.add_table(3, 2, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for r, row in enumerate([("Item", "Cost"), ("Lamp", "3400"), ("Paint", "780")]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def xlsx_two_sheets() -> bytes:
    """A workbook with the suppliers' costs on one sheet and their contacts on another."""
    import openpyxl

    workbook = openpyxl.Workbook()
    costs = workbook.active
    costs.title = "Costs"
    for row in SUPPLIERS:
        costs.append(list(row))
    contacts = workbook.create_sheet("Contacts")
    for row in [
        ("Supplier", "Contact", "City"),
        ("Acme", "Ivo Sand", "Porto"),
        ("Globex", "Lena Berg", "Oslo"),
    ]:
        contacts.append(list(row))
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def csv_suppliers() -> bytes:
    return "\n".join(",".join(str(v) for v in row) for row in SUPPLIERS).encode() + b"\n"


def png_scanned(lines: list[str], *, size: tuple[int, int] = (1240, 900)) -> bytes:
    """A page as a scanner gives it: ``lines`` drawn in black on white, as a PNG (no text layer)."""
    from PIL import Image, ImageDraw, ImageFont

    image = Image.new("RGB", size, "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=36)
    y = 120
    for line in lines:
        if line:
            draw.text((100, y), line, fill="black", font=font)
        y += 56
    out = io.BytesIO()
    image.save(out, "PNG")
    return out.getvalue()


def pdf_of_images(pngs: list[bytes]) -> bytes:
    """A scanned PDF: each page one image (Pillow writes the PDF), no text layer."""
    from PIL import Image

    images = [Image.open(io.BytesIO(png)).convert("RGB") for png in pngs]
    out = io.BytesIO()
    images[0].save(out, "PDF", resolution=150, save_all=True, append_images=images[1:])
    return out.getvalue()


def docx_encrypted() -> bytes:
    """A Word document protected by a password to open (Office's agile encryption)."""
    from msoffcrypto.format.ooxml import OOXMLFile

    plain = io.BytesIO(docx_report())
    out = io.BytesIO()
    OOXMLFile(plain).encrypt("secret", out)
    return out.getvalue()
