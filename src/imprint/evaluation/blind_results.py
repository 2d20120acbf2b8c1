"""Typed results of the blind (model-less) baselines of a run: one row type per classifier
(:class:`BlindClassifierMetrics`; the SoK forest's row, metrics.json's ``blind`` entry, is the
suite's own SoK row without the selection adjustment) and the suite's strongest classifier with
every classifier it was picked from (:class:`BlindSuiteMetrics`)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from imprint.diagnostics.blind_verdict import BlindVerdict, blind_verdict
from imprint.errors import DataError
from imprint.evaluation import jsonread as js
from imprint.evaluation.columns import summary_from_dict
from imprint.metrics import Interval, MetricSummary


@dataclass(frozen=True)
class BlindFailure:
    """A blind baseline that could not be fitted (too few texts, no shared words ...)."""

    error: str

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.error}


@dataclass(frozen=True)
class Spread:
    """The SoK protocol's 80/20 split AUCs: a spread (mean, sd), never a confidence interval."""

    mean: float
    std: float
    aucs: tuple[float, ...]
    kind: str

    def to_dict(self) -> dict[str, Any]:
        aucs = [js.json_float(a) for a in self.aucs]
        return {
            "mean": js.json_float(self.mean),
            "std": js.json_float(self.std),
            "aucs": aucs,
            "kind": self.kind,
        }

    @classmethod
    def from_dict(cls, data: Any, where: str) -> Spread:
        data = js.obj(data, where)
        aucs = js.get(data, "aucs", where)
        if not isinstance(aucs, list):
            raise js.bad(f"{where}.aucs", "a list", aucs)
        return cls(
            mean=js.num(js.get(data, "mean", where), f"{where}.mean"),
            std=js.num(js.get(data, "std", where), f"{where}.std"),
            aucs=tuple(js.num(a, f"{where}.aucs[{i}]") for i, a in enumerate(aucs)),
            kind=js.text(js.get(data, "kind", where), f"{where}.kind"),
        )


def _features(value: Any, where: str) -> tuple[tuple[str, float], ...]:
    if not isinstance(value, list):
        raise js.bad(where, "a list of [feature, weight]", value)
    out = []
    for i, pair in enumerate(value):
        if not isinstance(pair, list) or len(pair) != 2:
            raise js.bad(f"{where}[{i}]", "[feature, weight]", pair)
        out.append((js.text(pair[0], f"{where}[{i}]"), js.num(pair[1], f"{where}[{i}]")))
    return tuple(out)


@dataclass(frozen=True)
class BlindClassifierMetrics:
    """One model-less classifier of the suite, from its out-of-fold scores.

    ``summary``: its own 95 % intervals (None when it failed: then ``error``); ``adjusted``: the
    Bonferroni intervals it gets as one of m; ``protocol``: the SoK protocol's split-AUC spread
    (SoK forest only); ``top_features``: ``(feature, weight)``, weight > 0 pointing to members;
    ``warning``: the blind warning it alone would give.
    """

    name: str
    description: str
    summary: MetricSummary | None
    top_features: tuple[tuple[str, float], ...] = ()
    config: dict[str, Any] = field(default_factory=dict)
    protocol: Spread | None = None
    adjusted: MetricSummary | None = None
    error: str | None = None
    warning: str | None = None

    def to_dict(self, *, with_warning: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "description": self.description}
        if self.summary is not None:
            out.update(self.summary.to_dict())
        out["top_features"] = [[f, js.json_float(w)] for f, w in self.top_features]
        if self.protocol is not None:
            out["protocol_auc"] = self.protocol.to_dict()
        if self.adjusted is not None:
            out["adjusted"] = self.adjusted.to_dict()
        out["config"] = self.config
        if self.error:
            out["error"] = self.error
        if with_warning:
            out["warning"] = self.warning
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> BlindClassifierMetrics:
        data = js.obj(data, where)
        return cls(
            name=js.text(js.get(data, "name", where), f"{where}.name"),
            description=js.text(js.get(data, "description", where), f"{where}.description"),
            summary=summary_from_dict(data, where) if "auc" in data else None,
            top_features=_features(data.get("top_features", []), f"{where}.top_features"),
            config=js.obj(data.get("config", {}), f"{where}.config"),
            protocol=js.optional(data, "protocol_auc", Spread.from_dict, where),
            adjusted=js.optional(data, "adjusted", summary_from_dict, where),
            error=js.text(data.get("error"), f"{where}.error", optional=True),
            warning=js.text(data.get("warning"), f"{where}.warning", optional=True),
        )

    def sok_dict(self) -> dict[str, Any]:
        """The metrics.json ``blind`` entry (the SoK forest's row): as :meth:`to_dict`, its
        protocol's split AUCs under ``spread`` (None without them), no adjusted intervals."""
        assert self.summary is not None  # a failed fit is a BlindFailure, never this row
        out: dict[str, Any] = {"name": self.name, "description": self.description}
        out.update(self.summary.to_dict())
        out["top_features"] = [[f, js.json_float(w)] for f, w in self.top_features]
        out.update(config=self.config, warning=self.warning)
        out["spread"] = None if self.protocol is None else self.protocol.to_dict()
        return out

    @classmethod
    def from_sok_dict(cls, data: Any, where: str) -> BlindClassifierMetrics | BlindFailure:
        """Read :meth:`sok_dict` (or a failure's ``{"error"}``) back."""
        data = js.obj(data, where)
        if "error" in data:
            return BlindFailure(js.text(data["error"], f"{where}.error"))
        if "auc" not in data:
            raise DataError(f"{where} has neither 'auc' nor 'error'")
        row = cls.from_dict({k: v for k, v in data.items() if k != "spread"}, where)
        return replace(row, protocol=js.optional(data, "spread", Spread.from_dict, where))


@dataclass(frozen=True)
class Selection:
    """How the strongest blind classifier was picked and the level of its intervals."""

    n_classifiers: int
    confidence: float
    rule: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_classifiers": self.n_classifiers,
            "confidence": self.confidence,
            "rule": self.rule,
        }


@dataclass(frozen=True)
class BlindSuiteMetrics:
    """The strongest model-less classifier (``strongest``, a key of ``baselines``): ``selected``
    holds its figures with the intervals any claim about it must use (Bonferroni-adjusted when
    picked from several, see ``selection``); ``auc_unadjusted`` its own 95 % AUC interval;
    ``warning`` the blind warning the suite gives (None at chance)."""

    strongest: str
    selected: MetricSummary
    auc_unadjusted: Interval | None
    selection: Selection
    warning: str | None
    baselines: dict[str, BlindClassifierMetrics]

    @property
    def best(self) -> BlindClassifierMetrics:
        return self.baselines[self.strongest]

    def verdict(self) -> BlindVerdict:
        """The three-state blind verdict of the selection-adjusted interval (the one rule,
        :func:`imprint.diagnostics.blind_verdict.blind_verdict`)."""
        return blind_verdict(
            self.selected.auc,
            classifier=self.strongest,
            n_classifiers=self.selection.n_classifiers,
            confidence=self.selection.confidence,
        )

    def to_dict(self) -> dict[str, Any]:
        out = self.best.to_dict(with_warning=False)
        out.update(self.selected.to_dict())  # the claim's figures replace the classifier's own
        out["auc_unadjusted"] = (
            None if self.auc_unadjusted is None else self.auc_unadjusted.to_dict()
        )
        out["selection"] = self.selection.to_dict()
        out["strongest"] = self.strongest
        out["warning"] = self.warning
        out["baselines"] = {name: row.to_dict() for name, row in self.baselines.items()}
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str) -> BlindSuiteMetrics | BlindFailure:
        data = js.obj(data, where)
        if "error" in data and "strongest" not in data:
            return BlindFailure(js.text(data["error"], f"{where}.error"))
        rows = js.obj(js.get(data, "baselines", where), f"{where}.baselines")
        baselines = {
            name: BlindClassifierMetrics.from_dict(row, f"{where}.baselines[{name!r}]")
            for name, row in rows.items()
        }
        strongest = js.text(js.get(data, "strongest", where), f"{where}.strongest")
        if strongest not in baselines:
            raise DataError(f"{where}: strongest {strongest!r} is not among baselines {list(rows)}")
        selection = js.obj(js.get(data, "selection", where), f"{where}.selection")
        return cls(
            strongest=strongest,
            selected=summary_from_dict(data, where),
            auc_unadjusted=js.optional(data, "auc_unadjusted", js.interval, where),
            selection=Selection(
                js.integer(
                    js.get(selection, "n_classifiers", where), f"{where}.selection.n_classifiers"
                ),
                js.num(js.get(selection, "confidence", where), f"{where}.selection.confidence"),
                js.text(js.get(selection, "rule", where), f"{where}.selection.rule"),
            ),
            warning=js.text(data.get("warning"), f"{where}.warning", optional=True),
            baselines=baselines,
        )
