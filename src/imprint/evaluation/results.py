"""Typed results of a run: what the evaluation step computes once and the report stage renders.

``RunMetrics.to_dict()`` is the content of a run folder's ``metrics.json`` (the layout older
folders have, plus ``warning_kinds``); ``RunMetrics.from_dict`` and :func:`read_metrics` read
one back, so a finished run can be re-rendered or compared without refitting anything.

Layout (every figure an ``{"estimate", "low", "high"}`` object, NaN written as null):

- ``attacks``: score column -> :class:`MetricSummary`;
- ``warnings`` (messages) and ``warning_kinds`` (one :data:`WarningKind` each, same order);
- ``blind``: the SoK forest's row (:class:`BlindClassifierMetrics`, written by its
  ``sok_dict``), ``blind_suite``: the strongest
  model-less classifier with every classifier under ``baselines`` (:class:`BlindSuiteMetrics`);
  either is ``{"error": why}`` (:class:`BlindFailure`) when it could not be fitted;
- ``breakdown``: per value of a meta field, a column -> :class:`MetricSummary` map or
  ``{"error", "n"}`` for a group lacking a class (:class:`SkippedGroup`);
- ``blind_warn_delta``: the no-shift margin of the blind verdict (its interval's upper bound
  must be at most 0.5 + this for ``no_shift``);
- ``blind_verdict``: the three-state blind verdict and, under ``attacks``, each score column
  compared with the strongest blind classifier's out-of-fold scores on the same texts
  (:mod:`imprint.diagnostics.blind_verdict`; the warning, plot, caption and checks read it);
- ``comparisons``: every pair of score columns compared on the same samples (what is
  resampled, the number of pairs and the Bonferroni correction; :mod:`.comparisons`);
- ``roc``: ``columns`` (score column -> step ROC with its bootstrap band) and ``blind`` (the
  strongest blind baseline's), the curves the report draws (:mod:`.curves`);
- ``samples``: texts ``given``, ``scored`` and dropped (``dropped_total``, ``dropped`` by
  reason, ``dropped_ids_in_manifest``: reason -> the manifest key with its ids), the figures the
  report and terminal say (:mod:`.dropped`); absent in folders written before it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from imprint.diagnostics.blind import BLIND_WARN_DELTA
from imprint.diagnostics.blind_verdict import BlindVerdict, TextComparison
from imprint.errors import ConfigError, DataError
from imprint.evaluation import jsonread as js
from imprint.evaluation.blind_results import (
    BlindClassifierMetrics,
    BlindFailure,
    BlindSuiteMetrics,
    Selection,
    Spread,
)
from imprint.evaluation.columns import summary_from_dict
from imprint.evaluation.comparisons import comparisons_from_dict
from imprint.evaluation.curves import RocCurve
from imprint.evaluation.document_results import DocumentMetrics
from imprint.evaluation.dropped import DroppedSamples, dropped_from_dict
from imprint.formats import FORMAT_VERSION, check_format
from imprint.metrics import MetricSummary
from imprint.metrics.pairwise import PairedComparisons

__all__ = [
    "WARNING_KINDS",
    "BlindClassifierMetrics",
    "BlindFailure",
    "BlindSuiteMetrics",
    "Breakdown",
    "RunMetrics",
    "RunWarning",
    "Selection",
    "SkippedGroup",
    "Spread",
    "WarningKind",
    "read_metrics",
]

#: What a run warning is about; code tests the kind, never the message.
WarningKind = Literal[
    "blind_not_at_chance",  # a model-less classifier separates members from non-members
    "blind_not_computed",  # the SoK forest or the blind suite could not be fitted
    "unscored_samples",  # an attack gave some samples no score (NaN); left out of its metrics
    "single_class",  # a score column or breakdown group lacks members or non-members
    "few_nonmembers",  # too few non-members for any TPR@FPR bound to be measurable
    "data_defects",  # the data as published has duplicates, short texts or split overlap
    "unmatched_reference_ids",  # --references ids that match no sample, accepted by a flag
    "reference_is_target",  # a reference model's content fingerprint equals the target's
    "degenerate_scores",  # a score column is constant, or ranks texts exactly as another
    "attacks_left_out",  # 'all' skipped attacks this run cannot serve (e.g. too few held out)
    "unclassified",  # read from a metrics.json written before warnings had kinds
    "score_bound",  # a bootstrap collapsed to one value; the interval is a score bound
    "ties_decide_threshold",  # tied scores straddle a TPR@FPR threshold
]
WARNING_KINDS: tuple[str, ...] = get_args(WarningKind)


@dataclass(frozen=True)
class RunWarning:
    """One warning of a run: its ``kind`` (for code) and ``message`` (for people)."""

    kind: WarningKind
    message: str

    def __post_init__(self) -> None:
        if self.kind not in WARNING_KINDS:
            raise ConfigError(f"unknown warning kind {self.kind!r}; choose from {WARNING_KINDS}")


@dataclass(frozen=True)
class SkippedGroup:
    """A breakdown group that was not scored (``n`` samples, ``error`` says why)."""

    error: str
    n: int


@dataclass(frozen=True)
class Breakdown:
    """Metrics per value of ``meta[field]``: group -> (column -> metrics) or a skipped group."""

    field: str
    groups: dict[str, dict[str, MetricSummary] | SkippedGroup]

    def to_dict(self) -> dict[str, Any]:
        groups: dict[str, Any] = {}
        for name, group in self.groups.items():
            if isinstance(group, SkippedGroup):
                groups[name] = {"error": group.error, "n": group.n}
            else:
                groups[name] = {column: m.to_dict() for column, m in group.items()}
        return {"field": self.field, "groups": groups}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Breakdown:
        data = js.obj(data, where)
        groups: dict[str, dict[str, MetricSummary] | SkippedGroup] = {}
        for name, group in js.obj(js.get(data, "groups", where), f"{where}.groups").items():
            at = f"{where}.groups[{name!r}]"
            group = js.obj(group, at)
            if isinstance(group.get("error"), str):
                groups[name] = SkippedGroup(
                    group["error"], js.integer(js.get(group, "n", at), f"{at}.n")
                )
            else:
                groups[name] = {c: summary_from_dict(m, f"{at}[{c!r}]") for c, m in group.items()}
        return cls(js.text(js.get(data, "field", where), f"{where}.field"), groups)


@dataclass(frozen=True)
class RunMetrics:
    """Everything the evaluation step measured in a run (see the module docstring)."""

    attacks: dict[str, MetricSummary]
    warnings: tuple[RunWarning, ...] = ()
    blind: BlindClassifierMetrics | BlindFailure | None = None
    blind_suite: BlindSuiteMetrics | BlindFailure | None = None
    breakdown: Breakdown | None = None
    blind_warn_delta: float = BLIND_WARN_DELTA
    documents: DocumentMetrics | None = None  # --unit document (imprint.evaluation.documents)
    # every pair of score columns on the same samples (imprint.evaluation.comparisons)
    comparisons: PairedComparisons | None = None
    # each column's step ROC with its bootstrap band, and the strongest blind baseline's
    # (imprint.evaluation.curves); what the report draws
    roc: dict[str, RocCurve] = field(default_factory=dict)
    blind_roc: RocCurve | None = None
    # the one reading of the blind baseline (diagnostics.blind_verdict) and each column's
    # paired comparison with the strongest blind classifier's out-of-fold scores
    blind_verdict: BlindVerdict | None = None
    text_comparisons: dict[str, TextComparison] = field(default_factory=dict)
    # the texts given, scored and dropped by reason (imprint.evaluation.dropped), from the
    # manifest; None before the report stage fills it, or in folders written before it
    samples: DroppedSamples | None = None

    def verdict(self) -> BlindVerdict | None:
        """The blind verdict: the recorded one, or (a folder written before it was recorded)
        the stored suite's by the same rule; None without a fitted suite."""
        if self.blind_verdict is not None:
            return self.blind_verdict
        suite = self.blind_suite
        return suite.verdict() if isinstance(suite, BlindSuiteMetrics) else None

    def warnings_of(self, kind: WarningKind) -> list[str]:
        """The messages of the warnings of ``kind``."""
        return [w.message for w in self.warnings if w.kind == kind]

    def to_frame(self) -> Any:
        """One row per score column x figure (``auc``, ``tpr@1%``, ...) with ``estimate``,
        ``low``, ``high``, ``method``, ``unit`` (what was resampled) and why a figure is not
        measurable: a pandas DataFrame (:func:`imprint.evaluation.frames.metrics_frame`)."""
        from imprint.evaluation.frames import metrics_frame

        return metrics_frame(self.attacks, self.blind_suite)

    def to_dict(self) -> dict[str, Any]:
        """The ``metrics.json`` content (JSON-ready)."""
        out: dict[str, Any] = {
            "format_version": FORMAT_VERSION,  # imprint.formats; the schema is metrics.schema.json
            "attacks": {name: m.to_dict() for name, m in self.attacks.items()},
            "warnings": [w.message for w in self.warnings],
            "warning_kinds": [w.kind for w in self.warnings],
        }
        if isinstance(self.blind, BlindClassifierMetrics):
            out["blind"] = self.blind.sok_dict()
        elif self.blind is not None:
            out["blind"] = self.blind.to_dict()
        if self.blind_suite is not None:
            out["blind_suite"] = self.blind_suite.to_dict()
        if self.breakdown is not None:
            out["breakdown"] = self.breakdown.to_dict()
        out["blind_warn_delta"] = self.blind_warn_delta
        if self.blind_verdict is not None:
            out["blind_verdict"] = {
                **self.blind_verdict.to_dict(),
                "attacks": {c: t.to_dict() for c, t in self.text_comparisons.items()},
            }
        if self.documents is not None:
            out["documents"] = self.documents.to_dict()
        if self.comparisons is not None:
            out["comparisons"] = self.comparisons.to_dict()
        if self.roc or self.blind_roc is not None:
            out["roc"] = {"columns": {c: v.to_dict() for c, v in self.roc.items()}}
            if self.blind_roc is not None:
                out["roc"]["blind"] = self.blind_roc.to_dict()
        if self.samples is not None:
            out["samples"] = self.samples.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "metrics.json") -> RunMetrics:
        """Read ``to_dict()``'s output back; a malformed value raises :class:`DataError` naming
        its place. Folders written before ``warning_kinds`` get kind ``unclassified``; a file
        of a newer major ``format_version`` is refused (:func:`imprint.formats.check_format`)."""
        data = js.obj(data, where)
        check_format(data, where)
        attacks = js.obj(js.get(data, "attacks", where), f"{where}.attacks")

        return cls(
            attacks={
                c: summary_from_dict(m, f"{where}.attacks[{c!r}]") for c, m in attacks.items()
            },
            warnings=_warnings(data, where),
            blind=js.optional(data, "blind", BlindClassifierMetrics.from_sok_dict, where),
            blind_suite=js.optional(data, "blind_suite", BlindSuiteMetrics.from_dict, where),
            breakdown=js.optional(data, "breakdown", Breakdown.from_dict, where),
            blind_warn_delta=js.num(
                data.get("blind_warn_delta", BLIND_WARN_DELTA), f"{where}.blind_warn_delta"
            ),
            documents=_documents(data, where),
            comparisons=js.optional(data, "comparisons", comparisons_from_dict, where),
            samples=js.optional(data, "samples", dropped_from_dict, where),
            **_curves(data, where),
            **_verdict(data, where),
        )


def _verdict(data: dict[str, Any], where: str) -> dict[str, Any]:
    """``blind_verdict`` and ``text_comparisons`` from metrics.json (absent in older folders:
    :meth:`RunMetrics.verdict` then reads the stored suite by the same rule)."""
    raw = data.get("blind_verdict")
    if raw is None:
        return {}
    at = f"{where}.blind_verdict"
    raw = js.obj(raw, at)
    try:
        verdict = BlindVerdict.from_dict(raw)
        attacks = js.obj(raw.get("attacks", {}), f"{at}.attacks")
        compared = {c: TextComparison.from_dict(js.obj(v, f"{at}.attacks[{c!r}]"))
                    for c, v in attacks.items()}  # fmt: skip
    except (KeyError, TypeError, ValueError) as err:
        raise DataError(
            f"{at} is malformed ({type(err).__name__}: {err}); rerun the evaluation"
        ) from err
    return {"blind_verdict": verdict, "text_comparisons": compared}


def _curves(data: dict[str, Any], where: str) -> dict[str, Any]:
    """``roc`` and ``blind_roc`` from metrics.json's ``roc`` (absent in older folders)."""
    if data.get("roc") is None:
        return {}
    roc = js.obj(data["roc"], f"{where}.roc")
    columns = js.obj(roc.get("columns", {}), f"{where}.roc.columns")
    return {
        "roc": {
            c: RocCurve.from_dict(v, f"{where}.roc.columns[{c!r}]") for c, v in columns.items()
        },
        "blind_roc": js.optional(roc, "blind", RocCurve.from_dict, f"{where}.roc"),
    }


def _documents(data: dict[str, Any], where: str) -> DocumentMetrics | None:
    return js.optional(data, "documents", DocumentMetrics.from_dict, where)


def _warnings(data: dict[str, Any], where: str) -> tuple[RunWarning, ...]:
    messages = js.get(data, "warnings", where)
    if not isinstance(messages, list):
        raise js.bad(f"{where}.warnings", "a list of strings", messages)
    kinds = data.get("warning_kinds", ["unclassified"] * len(messages))
    if not isinstance(kinds, list) or len(kinds) != len(messages):
        raise js.bad(f"{where}.warning_kinds", f"a list of {len(messages)} kinds", kinds)
    out = []
    for i, (kind, message) in enumerate(zip(kinds, messages, strict=True)):
        if kind not in WARNING_KINDS:
            raise js.bad(f"{where}.warning_kinds[{i}]", f"one of {WARNING_KINDS}", kind)
        out.append(RunWarning(kind, js.text(message, f"{where}.warnings[{i}]")))
    return tuple(out)


def read_metrics(run_dir: str | Path) -> RunMetrics:
    """The :class:`RunMetrics` of a run folder written by ``imprint run`` (or its metrics.json)."""
    path = Path(run_dir)
    file = path / "metrics.json" if path.is_dir() else path
    if not file.is_file():
        raise DataError(f"{path} has no metrics.json; pass a run folder written by `imprint run`")
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise DataError(f"{file} is not valid JSON ({err}); rerun the run to rewrite it") from err
    check_format(data, str(file))  # a newer layout: say which imprint reads it
    try:
        return RunMetrics.from_dict(data, where=str(file))
    except DataError as err:
        raise DataError(f"{err}; is it a metrics.json written by `imprint run`?") from err
