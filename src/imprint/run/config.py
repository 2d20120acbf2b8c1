"""What the user asked of a run: models with their options, data, attacks, evaluation, output.

A :class:`RunConfig` holds requests only, as given; nothing in it is derived. What follows from it
(each model's provider and typed options, the reference models, the target's access level, the
typed attack parameters) is computed once by :func:`imprint.run.plan.resolve`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imprint.coerce import Mismatch, name_list
from imprint.documents.run_hook import DocumentOptions
from imprint.errors import ConfigError
from imprint.executors import ExecutorConfig
from imprint.training_manifest import check_reference_names

#: why a --ref name and a --references model name may not be equal
SHARED_NAMESPACE = " (--ref names and the --references manifest's model names share one namespace)"


@dataclass(frozen=True)
class RunConfig:
    """Everything a run depends on; written whole into the manifest.

    Models: ``model`` (the target's spec) with ``model_args``, its backend's own options (the
    CLI's ``--model-arg KEY=VALUE`` and ``--api-*`` flags); ``refs`` (name, spec) pairs and the
    ``references`` of a game or training manifest; ``shared_args``, options given once for every
    model whose provider takes them (the CLI's ``--device``, ``--dtype``, ``--max-length``,
    ``--start-token``); ``api_base`` serves the target over an OpenAI-compatible API.
    """

    model: str
    data: str
    # the run folder; None: a new runs/<time>-<model>-<data> (runs/latest points to it), as the
    # CLI without --out
    out: Path | None = None
    attacks: tuple[str, ...] = ("all",)
    refs: tuple[tuple[str, str], ...] = ()  # (name, model spec)
    # reference models with known training data (LiRA, RMIA): a game folder built with
    # --reference-models K, or a training manifest (imprint.training_manifest)
    references: str | None = None
    # accept --references ids that match no sample of the run (counted in manifest and report)
    allow_unmatched_ids: bool = False
    # the target backend's own options, typed by its provider (imprint.backends.registry)
    model_args: Mapping[str, Any] = field(default_factory=dict)
    # options for every model (target and references) whose provider takes them
    shared_args: Mapping[str, Any] = field(default_factory=dict)
    # a text-only target: an OpenAI-compatible API at this root serving ``model``
    api_base: str | None = None
    params: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    pools: Mapping[str, str] = field(default_factory=dict)  # pool name -> data spec
    # non-member shots held out of EVERY attack's evaluation, whichever attacks run, for the
    # ReCaLL-family attacks (imprint.attacks.shots.hold_out); 0: none
    shot_holdout: int = 10
    text_field: str | None = None
    label_field: str | None = None
    truncate_words: int | None = None
    min_words: int | None = None
    n_per_label: int | None = None
    dedupe: bool = True
    breakdown: str | None = None  # a meta field to break metrics down by
    seed: int = 0
    n_bootstrap: int = 1000
    token_budget: int | None = None  # padded tokens per forward; None = auto
    cache: Path | None = None  # default: imprint.backends.models.default_cache_path()
    blind: bool = True
    on_bad: str = "raise"  # a bad data row: "raise" (file and line named) or "drop" (counted)
    progress: bool = True
    # --unit document: documents split into sequences, scored, aggregated (imprint.documents)
    documents: DocumentOptions | None = None
    # where model work runs: this process, or Ray actors (--executor ray --address --workers)
    executor: ExecutorConfig = field(default_factory=ExecutorConfig)
    overwrite: bool = False  # replace an existing folder at ``out`` that is not an imprint run

    def __post_init__(self) -> None:
        # checks of the values alone; what needs the registries or files is resolve()'s
        try:  # "loss,zlib" is two attacks, as --attacks reads it (never the letters l, o, ...)
            object.__setattr__(self, "attacks", name_list(self.attacks, "attacks"))
        except Mismatch as err:
            raise ConfigError(str(err)) from None
        if self.out is not None and not isinstance(self.out, Path):
            object.__setattr__(self, "out", Path(self.out))  # a str from Python or YAML
        if not self.attacks:  # '--attacks ""' would score nothing and exit 0
            raise ConfigError(
                "--attacks names no attack; name at least one, e.g. --attacks loss,zlib, or all"
            )
        if self.on_bad not in ("raise", "drop"):
            raise ConfigError(f"--on-bad must be raise or drop, not {self.on_bad!r}")
        if self.shot_holdout < 0:
            raise ConfigError(f"--shot-holdout must be >= 0, got {self.shot_holdout}")
        if self.n_bootstrap < 1:
            raise ConfigError(f"n_bootstrap must be >= 1, got {self.n_bootstrap}")
        if self.api_base is not None:  # no credentials or query: the URL goes in the manifest
            from imprint.backends.http_checks import check_api_base

            check_api_base(self.api_base)
        check_reference_names([n for n, _ in self.refs], note=SHARED_NAMESPACE)
