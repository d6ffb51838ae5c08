"""The rerank stage: a local cross-encoder reads the question with each of search's best
candidates and orders them by what it scores.

Off unless ``rerank_model`` names a folder holding ``model.onnx`` (a cross-encoder exported
to ONNX: ms-marco-MiniLM-L-6-v2, jina-reranker-v1-tiny-en, bge-reranker-base…) and its
``tokenizer.json``; it runs on ``onnxruntime`` with ``tokenizers`` (``memdir[rerank]``). The
stage sees the fused top ``CANDIDATES`` (never only the ``k`` already cut), after the
period's weighing, and must finish within ``rerank_budget`` seconds: past it, or when the
model fails, the fused order stands and ``why`` says so. One model per folder per process.
This module does NOT rank by itself and does NOT download anything.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config import Config
from ..entry import Hit
from ..errors import ConfigError, MemdirError

log = logging.getLogger("memdir")

CANDIDATES = 20  # fused candidates the stage reads
MAX_TOKENS = 128  # of a question and a memory together (20 pairs: 0.4 s on 2 cores)
TEXT_CHARS = 2000  # of a memory's text handed to the tokenizer (it truncates to MAX_TOKENS)

_MODELS: dict[str, CrossEncoder] = {}
_LOCK = threading.Lock()
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="memdir-rerank")


class CrossEncoder:
    """A cross-encoder from a folder: ``score(question, texts)`` (higher: more relevant)."""

    def __init__(self, folder: Path) -> None:
        model, tokenizer = folder / "model.onnx", folder / "tokenizer.json"
        for path in (model, tokenizer):
            if not path.is_file():
                raise ConfigError(
                    f"rerank_model = {str(folder)!r}: no {path.name} there — give a folder"
                    " holding a cross-encoder's model.onnx and tokenizer.json"
                )
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError:
            raise ConfigError(
                "rerank_model is set but memdir[rerank] is not installed"
                " (pip install 'memdir[rerank]')"
            ) from None
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        self.session = onnxruntime.InferenceSession(
            str(model), options, providers=["CPUExecutionProvider"]
        )
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(tokenizer))
        self.tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self.tokenizer.enable_padding()
        self.name = folder.name

    def score(self, question: str, texts: Sequence[str]) -> list[float]:
        """How relevant each text is to the question, as the model scores the pair."""
        import numpy as np

        if not texts:
            return []
        batch = self.tokenizer.encode_batch([(question, t[:TEXT_CHARS]) for t in texts])
        arrays = {
            "input_ids": [e.ids for e in batch],
            "attention_mask": [e.attention_mask for e in batch],
            "token_type_ids": [e.type_ids for e in batch],
        }
        feed = {k: np.asarray(v, dtype=np.int64) for k, v in arrays.items() if k in self.inputs}
        out = np.asarray(self.session.run(None, feed)[0], dtype=np.float32)
        out = out.reshape(len(texts), -1)
        column = 1 if out.shape[1] == 2 else 0  # a two-class head: "relevant" is the second
        return [float(x) for x in out[:, column]]


def model_of(config: Config) -> CrossEncoder | None:
    """The configured cross-encoder, loaded once per folder (None: the stage is off)."""
    if not config.rerank_model:
        return None
    folder = Path(os.path.expanduser(config.rerank_model))
    key = str(folder.absolute())
    with _LOCK:
        if key not in _MODELS:
            _MODELS[key] = CrossEncoder(folder)
        return _MODELS[key]


def pool(config: Config, k: int) -> int:
    """How many fused candidates a search of ``k`` ranks when the stage is on."""
    return max(k, CANDIDATES) if config.rerank_model else k


def reorder(hits: list[Hit], question: str, config: Config, k: int) -> list[Hit]:
    """The ``k`` best of ``hits`` (best first), the first ``CANDIDATES`` reordered by the
    cross-encoder when it is configured and answers within ``rerank_budget``; each
    reordered hit carries its rerank score."""
    try:
        model = model_of(config)
    except MemdirError as exc:
        log.warning("memdir: the rerank stage is off: %s", exc)
        return hits[:k]
    head = hits[:CANDIDATES]
    if model is None or len(head) < 2:
        return hits[:k]
    texts = [_text_of(h) for h in head]
    job = _POOL.submit(model.score, question, texts)
    try:
        scores = job.result(timeout=max(0.0, config.rerank_budget))
    except concurrent.futures.TimeoutError:
        log.info("memdir: the rerank took longer than rerank_budget; the fused order stands")
        return hits[:k]
    except Exception as exc:  # the model's own failure: the fused order stands, and why
        log.warning("memdir: the rerank failed (%s); the fused order stands", exc)
        return hits[:k]
    order = sorted(range(len(head)), key=lambda i: -scores[i])  # stable: ties keep fused order
    ranked = [dataclasses.replace(head[i], rerank=scores[i]) for i in order]
    return (ranked + hits[CANDIDATES:])[:k]


def _text_of(hit: Hit) -> str:
    """What the cross-encoder reads of a memory: its name as words, description, body."""
    try:
        mem: Any = hit.memory
        body = mem.body
    except (MemdirError, OSError, LookupError):
        body = ""
    e = hit.entry
    return f"{e.name.replace('-', ' ')}: {e.description}\n{body}".strip()
