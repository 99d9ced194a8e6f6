"""The BERT encoder of all-MiniLM-L6-v2 in numpy: its weights, laid out for row-major
matmuls, and the forward pass to mean-pooled, L2-normalised sentence vectors
(core/embeddings/local.py reads the model files, tokenizes and batches the texts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from safetensors.numpy import load_file

from core.priority import Pause, no_pause

Padded = tuple[np.ndarray, np.ndarray]  # token ids and attention mask, (batch, width) each
# Added to attention scores of padding keys; finite so that a row never becomes NaN.
_MASKED = np.float32(-1e9)
# Attention scores computed at once, in elements (4 MB): a whole batch of 256-token texts
# would take 200 MB, and softmax over cache-sized blocks is ~25% faster.
_SCORES_BLOCK = 1 << 20
# Rows of the 1536-wide feed-forward intermediate that GELU handles at once (~400 KB).
_GELU_ROWS = 64


class _Norm(NamedTuple):
    weight: np.ndarray
    bias: np.ndarray


class _Layer(NamedTuple):
    qkv_w: np.ndarray  # (hidden, 3 * hidden), query part pre-scaled by 1/sqrt(head_dim)
    qkv_b: np.ndarray
    out_w: np.ndarray
    out_b: np.ndarray
    attn_norm: _Norm
    ffn_in_w: np.ndarray
    ffn_in_b: np.ndarray
    ffn_out_w: np.ndarray
    ffn_out_b: np.ndarray
    ffn_norm: _Norm


@dataclass(frozen=True)
class Bert:
    """Read-only weights and shape constants of a BERT encoder."""

    word: np.ndarray  # (vocab, hidden)
    position: np.ndarray  # (max_positions, hidden), token-type 0 folded in
    norm: _Norm
    layers: tuple[_Layer, ...]
    heads: int
    eps: float


def load(path: Path, config: dict) -> Bert:
    """Weights from a Hugging Face BertModel checkpoint, laid out for row-major matmuls."""
    w = load_file(str(path))
    heads = config["num_attention_heads"]
    scale = np.float32(1.0 / math.sqrt(config["hidden_size"] // heads))

    def linear(name: str) -> tuple[np.ndarray, np.ndarray]:
        # torch stores (out, in); transpose once so the forward pass is x @ W.
        return _frozen(w[f"{name}.weight"].T), _frozen(w[f"{name}.bias"])

    def norm(name: str) -> _Norm:
        return _Norm(_frozen(w[f"{name}.weight"]), _frozen(w[f"{name}.bias"]))

    layers = []
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        (q_w, q_b), (k_w, k_b), (v_w, v_b) = (
            linear(f"{p}.attention.self.{part}") for part in ("query", "key", "value")
        )
        layers.append(
            _Layer(  # in the field order of _Layer
                # One matmul for query, key and value instead of three.
                _frozen(np.concatenate([q_w * scale, k_w, v_w], axis=1)),
                _frozen(np.concatenate([q_b * scale, k_b, v_b])),
                *linear(f"{p}.attention.output.dense"),
                norm(f"{p}.attention.output.LayerNorm"),
                *linear(f"{p}.intermediate.dense"),
                *linear(f"{p}.output.dense"),
                norm(f"{p}.output.LayerNorm"),
            )
        )
    token_type = w["embeddings.token_type_embeddings.weight"][0]
    return Bert(
        word=_frozen(w["embeddings.word_embeddings.weight"]),
        position=_frozen(w["embeddings.position_embeddings.weight"] + token_type),
        norm=norm("embeddings.LayerNorm"),
        layers=tuple(layers),
        heads=heads,
        eps=float(config["layer_norm_eps"]),
    )


def _frozen(array: np.ndarray) -> np.ndarray:
    """A contiguous float32 copy that cannot be written, so concurrent embeds share it safely."""
    out = np.ascontiguousarray(array, dtype=np.float32)
    out.flags.writeable = False
    return out


def pad(sequences: Sequence[Sequence[int]]) -> Padded:
    """Token ids right-padded with 0 to the longest sequence, and the matching 0/1 mask."""
    width = max(len(s) for s in sequences)
    ids = np.zeros((len(sequences), width), dtype=np.int64)
    mask = np.zeros((len(sequences), width), dtype=np.float32)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1.0
    return ids, mask


def encode(bert: Bert, ids: np.ndarray, mask: np.ndarray, pause: Pause = no_pause) -> np.ndarray:
    """Normalised mean-pooled sentence vectors for one padded batch; `pause()` before each
    half of a layer (at most ~30 CPU-ms apart in ingestion's batches)."""
    batch, width = ids.shape
    x = bert.word[ids] + bert.position[:width]
    x = _layer_norm(x.reshape(batch * width, -1), bert.norm, bert.eps)
    key_bias = ((1.0 - mask) * _MASKED)[:, None, None, :]  # (batch, 1, 1, width)
    for layer in bert.layers:
        pause()
        attended = _self_attention(x, key_bias, layer, bert.heads)
        x = _layer_norm(attended + x, layer.attn_norm, bert.eps)
        pause()
        x = _layer_norm(_feed_forward(x, layer) + x, layer.ffn_norm, bert.eps)
    return _pooled(x.reshape(batch, width, -1), mask)


def encode_together(bert: Bert, batches: list[Padded]) -> list[np.ndarray]:
    """`encode` of each padded batch, with the row-wise work (matmuls, norms, GELU) done over
    the rows of all of them at once and attention batch by batch. The vectors are the same as
    batch by batch: BLAS computes each row of a product alike whatever the row count (two or
    more; a row's context width never changes), and the rest is row-wise."""
    x = np.concatenate(
        [
            (bert.word[ids] + bert.position[: ids.shape[1]]).reshape(ids.size, -1)
            for ids, _ in batches
        ]
    )
    x = _layer_norm(x, bert.norm, bert.eps)
    biases = [((1.0 - mask) * _MASKED)[:, None, None, :] for _, mask in batches]
    ends = np.cumsum([ids.size for ids, _ in batches]).tolist()
    spans = list(zip([0, *ends[:-1]], ends, strict=True))
    for layer in bert.layers:
        qkv = x @ layer.qkv_w + layer.qkv_b
        context = np.concatenate(
            [
                _contexts(qkv[start:end], bias, bert.heads)
                for (start, end), bias in zip(spans, biases, strict=True)
            ]
        )
        attended = context @ layer.out_w + layer.out_b
        x = _layer_norm(attended + x, layer.attn_norm, bert.eps)
        x = _layer_norm(_feed_forward(x, layer) + x, layer.ffn_norm, bert.eps)
    return [
        _pooled(x[start:end].reshape(mask.shape[0], mask.shape[1], -1), mask)
        for (start, end), (_, mask) in zip(spans, batches, strict=True)
    ]


def _pooled(tokens: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean over each text's tokens, L2-normalised."""
    pooled = np.einsum("bwd,bw->bd", tokens, mask) / mask.sum(axis=1, keepdims=True)
    return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)


def _self_attention(x: np.ndarray, key_bias: np.ndarray, layer: _Layer, heads: int) -> np.ndarray:
    """Multi-head self-attention over (batch * width, hidden) rows; padding keys ignored."""
    context = _contexts(x @ layer.qkv_w + layer.qkv_b, key_bias, heads)
    return context @ layer.out_w + layer.out_b


def _contexts(qkv: np.ndarray, key_bias: np.ndarray, heads: int) -> np.ndarray:
    """Attention outputs, (batch * width, hidden), from one batch's query-key-value rows."""
    batch, width = key_bias.shape[0], key_bias.shape[-1]
    hidden = qkv.shape[1] // 3
    q, k, v = qkv.reshape(batch, width, 3, heads, hidden // heads).transpose(2, 0, 3, 1, 4)
    context = np.empty((batch, width, heads, hidden // heads), dtype=np.float32)
    step = max(1, _SCORES_BLOCK // (heads * width * width))
    for start in range(0, batch, step):
        part = slice(start, start + step)
        context[part] = _attend(q[part], k[part], v[part], key_bias[part]).transpose(0, 2, 1, 3)
    return context.reshape(batch * width, hidden)


def _attend(q: np.ndarray, k: np.ndarray, v: np.ndarray, key_bias: np.ndarray) -> np.ndarray:
    """Dot-product attention per sequence and head (`q` comes pre-scaled)."""
    scores = q @ k.transpose(0, 1, 3, 2)
    scores += key_bias
    _softmax_inplace(scores)
    return scores @ v


def _softmax_inplace(scores: np.ndarray) -> None:
    """Softmax over the last axis, overwriting `scores` to avoid another large temporary."""
    scores -= scores.max(axis=-1, keepdims=True)
    np.exp(scores, out=scores)
    scores *= 1.0 / scores.sum(axis=-1, keepdims=True)


def _feed_forward(x: np.ndarray, layer: _Layer) -> np.ndarray:
    """The GELU feed-forward block."""
    hidden = x @ layer.ffn_in_w
    hidden += layer.ffn_in_b
    # Whole-matrix matmuls (row chunks make BLAS threads wait on each other), but GELU in
    # row chunks: its ~25 passes are memory-bound unless each chunk stays in cache.
    for start in range(0, hidden.shape[0], _GELU_ROWS):
        _gelu_inplace(hidden[start : start + _GELU_ROWS])
    out = hidden @ layer.ffn_out_w
    out += layer.ffn_out_b
    return out


def _layer_norm(x: np.ndarray, norm: _Norm, eps: float) -> np.ndarray:
    """LayerNorm over the last axis (biased variance, as torch)."""
    centred = x - x.mean(axis=-1, keepdims=True)
    variance = np.einsum("ij,ij->i", centred, centred)[:, None] / np.float32(x.shape[-1])
    centred *= 1.0 / np.sqrt(variance + np.float32(eps))
    centred *= norm.weight
    centred += norm.bias
    return centred


# erf(z) ~= z * P(z^2) / Q(z^2) on [-4, 4] (beyond, erf is +-1 in float32): the rational
# approximation Eigen and XLA use for float32, max error ~4e-7. numpy has no erf, and
# BERT's GELU is the exact erf form; the tanh approximation is off by up to 5e-4.
_ERF_P = tuple(
    np.float32(c)
    for c in (
        -2.72614225801306e-10,
        2.77068142495902e-08,
        -2.10102402082508e-06,
        -5.69250639462346e-05,
        -7.34990630326855e-04,
        -2.95459980854025e-03,
        -1.60960333262415e-02,
    )
)
_ERF_Q = tuple(
    np.float32(c)
    for c in (
        -1.45660718464996e-05,
        -2.13374055278905e-04,
        -1.68282697438203e-03,
        -7.37332916720468e-03,
        -1.42647390514189e-02,
    )
)


def _erf(z: np.ndarray) -> np.ndarray:
    """float32 erf (max abs error ~4e-7); may overwrite `z`."""
    np.clip(z, -4.0, 4.0, out=z)
    z2 = z * z
    p = _horner(z2, _ERF_P)
    q = _horner(z2, _ERF_Q)
    p *= z
    p /= q
    return p


def _horner(x: np.ndarray, coefficients: tuple[np.float32, ...]) -> np.ndarray:
    """Polynomial with the given coefficients (highest power first), evaluated at x."""
    acc = x * coefficients[0]
    acc += coefficients[1]
    for c in coefficients[2:]:
        acc *= x
        acc += c
    return acc


def _gelu_inplace(x: np.ndarray) -> None:
    """x * Phi(x) with the exact (erf) normal CDF, as BERT's "gelu"."""
    cdf = _erf(x * np.float32(1.0 / math.sqrt(2.0)))
    cdf += 1.0
    cdf *= 0.5
    x *= cdf
