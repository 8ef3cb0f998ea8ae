"""Read the text of an image (a PNG or JPEG, or a scanned PDF page's image) by OCR.

The engine is Debian's ``tesseract-ocr`` (``scripts/system_deps.sh`` installs it, with its English
model, as it installs the rest), run as a process: nothing is downloaded at run time and no model
is bundled here. Measured on a rendered A4 page at 150 dpi on this machine's CPU: about 0.6 s a
page against 1.9 s for RapidOCR's ONNX models, which also bring OpenCV (80 MB, AVX-512 code paths)
into the virtualenv (#50). Pillow opens the image, applies its EXIF rotation and flattens it to grey
on white before the engine reads it.
"""

from __future__ import annotations

import io
import os
import subprocess
from dataclasses import dataclass

from apps.documents.errors import DocumentCorrupt, DocumentTooLarge, OcrUnavailable

# The largest image read (pixels): an A4 page at 600 dpi is 35 M; more is a decompression bomb.
MAX_PIXELS = 60_000_000
# Smaller images (icons, rules, logos on a scanned page) hold no text worth reading.
MIN_SIDE = 32
TIMEOUT_SECONDS = 120
# What Pillow may open: an uploaded image is a PNG or JPEG; a scanned PDF page's image, as pypdf gives
# it, may also be TIFF (CCITT fax), JPEG 2000 or GIF. No other decoder (AVIF, WebP...) is reached.
UPLOAD_FORMATS = ("PNG", "JPEG")
PDF_IMAGE_FORMATS = ("PNG", "JPEG", "TIFF", "JPEG2000", "GIF")


@dataclass(frozen=True)
class OcrText:
    """An image's text, paragraph by paragraph, and the engine's mean word confidence (0 to 1)."""

    paragraphs: list[str]
    confidence: float | None
    words: int


def _png_for_engine(data: bytes, formats: tuple[str, ...]) -> bytes | None:
    """The image as an 8-bit grey PNG, upright and flattened on white; None for a tiny image."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        opened = Image.open(io.BytesIO(data), formats=formats)
        width, height = opened.size
        if width * height > MAX_PIXELS:
            raise DocumentTooLarge(
                f"the image has {width}×{height} pixels; at most {MAX_PIXELS} pixels are read"
            )
        if min(width, height) < MIN_SIDE:
            return None
        image: Image.Image = ImageOps.exif_transpose(opened)
        if image.mode in ("RGBA", "LA", "P", "PA"):
            image = image.convert("RGBA")
            white = Image.new("RGBA", image.size, (255, 255, 255, 255))
            image = Image.alpha_composite(white, image)
        image = image.convert("L")
        out = io.BytesIO()
        image.save(out, "PNG")
    except UnidentifiedImageError:
        raise DocumentCorrupt(
            f"the file is not an image that can be read (one of {', '.join(formats)})"
        ) from None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as exc:
        raise DocumentCorrupt(
            f"the image could not be read (it may be damaged or cut short): {exc}"
        ) from None
    return out.getvalue()


def _tsv_text(tsv: str) -> OcrText:
    """Paragraphs and mean confidence from tesseract's TSV (level 5 rows are words)."""
    paragraphs: dict[tuple[str, str, str], dict[str, list[str]]] = {}
    confidences: list[float] = []
    for line in tsv.splitlines()[1:]:
        cells = line.split("\t")
        if len(cells) < 12 or cells[0] != "5":
            continue
        word = cells[11].strip()
        if not word:
            continue
        try:
            confidence = float(cells[10])
        except ValueError:
            continue
        if confidence >= 0:
            confidences.append(confidence)
        lines = paragraphs.setdefault((cells[1], cells[2], cells[3]), {})
        lines.setdefault(cells[4], []).append(word)
    texts = ["\n".join(" ".join(words) for words in lines.values()) for lines in paragraphs.values()]
    mean = round(sum(confidences) / len(confidences) / 100, 4) if confidences else None
    return OcrText(paragraphs=texts, confidence=mean, words=len(confidences))


def image_text(data: bytes, *, languages: str = "eng", formats: tuple[str, ...] = UPLOAD_FORMATS) -> OcrText:
    """Read ``data`` (an image in one of ``formats``) by OCR; an image with no readable text gives no
    paragraph."""
    png = _png_for_engine(data, formats)
    if png is None:
        return OcrText(paragraphs=[], confidence=None, words=0)
    # One thread: the machine's cores are shared with the app's other work; pages are read in turn.
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}
    try:
        done = subprocess.run(
            ["tesseract", "stdin", "stdout", "-l", languages, "--psm", "3", "tsv"],
            input=png,
            capture_output=True,
            timeout=TIMEOUT_SECONDS,
            env=env,
            check=False,
        )
    except FileNotFoundError:
        raise OcrUnavailable(
            "this server cannot read scanned pages or images: its OCR engine is not installed "
            "(Debian's tesseract-ocr; scripts/system_deps.sh installs it)"
        ) from None
    except subprocess.TimeoutExpired:
        raise DocumentTooLarge(f"OCR of the image took over {TIMEOUT_SECONDS} s") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise OcrUnavailable(f"the OCR engine failed: {message[-1] if message else done.returncode}")
    return _tsv_text(done.stdout.decode("utf-8", "replace"))
