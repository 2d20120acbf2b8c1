"""Blind (model-less) bag-of-words baseline of Meeus et al. (SoK, 2024)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from imprint.diagnostics import BLIND_WARN_DELTA, BlindResult, blind_baseline, blind_warning
from imprint.diagnostics.blind import blind_result_verdict, result_interval
from imprint.diagnostics.blind_verdict import blind_verdict
from imprint.errors import ConfigError, DataError

WIKIMIA_32 = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "wikimia" / "WikiMIA_length32.jsonl"
)
VOCAB = [f"word{i}" for i in range(30)]


def _docs(n: int, extra: list[str], rng: np.random.Generator) -> list[str]:
    return [" ".join([*rng.choice(VOCAB, size=12), *extra]) for _ in range(n)]


@pytest.fixture(scope="module")
def unshifted() -> tuple[list[str], list[int], BlindResult]:
    rng = np.random.default_rng(7)
    texts = _docs(800, [], rng)
    labels = [1, 0] * 400  # a random split of one pool: no shift
    return texts, labels, blind_baseline(texts, labels, n_runs=2, seed=0)


def test_shifted_sets_are_separable():
    rng = np.random.default_rng(0)
    texts = _docs(60, ["alpha"], rng) + _docs(60, ["beta"], rng)
    labels = [1] * 60 + [0] * 60
    result = blind_baseline(texts, labels, n_runs=3, seed=3)
    assert result.auc_mean > 0.95
    assert {w for w, _ in result.top_features[:2]} == {"alpha", "beta"}
    assert blind_warning(result) is not None
    assert "distinguishable" in blind_warning(result)


def test_unshifted_split_is_near_chance(unshifted):
    _, _, result = unshifted
    assert abs(result.auc_mean - 0.5) <= BLIND_WARN_DELTA
    assert result.n_runs == len(result.aucs) == 2
    assert result.auc_std == pytest.approx(float(np.std(result.aucs)))
    assert blind_warning(result) is None


def test_deterministic_and_run_i_uses_seed_plus_i(unshifted):
    texts, labels, result = unshifted
    # run 1 of the seed-0 call must be exactly a fresh single run with seed 1
    again = blind_baseline(texts, labels, n_runs=1, seed=1)
    assert again.aucs == result.aucs[1:2]
    assert again.top_features != result.top_features  # averaged over 1 run, not 2
    assert result.aucs[0] != result.aucs[1]  # different seeds, different splits


def test_to_dict_is_json_ready(unshifted):
    _, _, result = unshifted
    out = json.loads(json.dumps(result.to_dict()))
    assert out["aucs"] == list(result.aucs)
    assert out["config"]["n_estimators"] == 500
    assert out["config"]["min_df"] == 0.05
    assert len(out["top_features"]) <= 10


def _result(*aucs: float) -> BlindResult:
    config = {"test_size": 0.2}
    return BlindResult("b", float(np.mean(aucs)), float(np.std(aucs)), aucs, len(aucs), config)


def test_warning_reads_the_interval_not_the_point_estimate():
    """One rule (diagnostics.blind_verdict): the old |mean - 0.5| > 0.1 warned on a wide spread
    around 0.65 and stayed silent on tight splits at 0.58; the interval decides both ways."""
    wide = _result(0.40, 0.90, 0.55, 0.85, 0.55)  # mean 0.65, interval reaches below 0.5
    tight = _result(0.57, 0.58, 0.59, 0.58, 0.58)  # mean 0.58, interval [0.567, 0.593]
    assert blind_result_verdict(wide).state == "inconclusive"
    assert blind_warning(wide) is None
    assert blind_result_verdict(tight).state == "shift"
    warning = blind_warning(tight)
    assert warning is not None and "distinguishable" in warning
    assert blind_result_verdict(tight).reason in warning  # the same sentence as every output
    low = _result(0.20, 0.25, 0.30, 0.22, 0.28)  # below chance: inconclusive, as in the run
    assert blind_result_verdict(low).state == "inconclusive" and blind_warning(low) is None
    near = _result(0.49, 0.51, 0.50, 0.52, 0.48)
    assert blind_result_verdict(near).state == "no_shift" and blind_warning(near) is None


def test_interval_is_the_corrected_resampled_t_over_the_splits():
    from scipy.stats import t

    r = _result(0.57, 0.58, 0.59, 0.58, 0.58)
    iv = result_interval(r)
    half = t.ppf(0.975, 4) * np.sqrt((1 / 5 + 0.2 / 0.8) * np.var(r.aucs, ddof=1))
    assert (iv.low, iv.high) == pytest.approx((r.auc_mean - half, r.auc_mean + half))
    verdict = blind_result_verdict(r)
    assert verdict == blind_verdict(iv, classifier="b", n_classifiers=1, confidence=0.95)
    one = result_interval(_result(0.99))  # one split: no variability, no interval, no claim
    assert np.isnan(one.low) and blind_result_verdict(_result(0.99)).state == "inconclusive"


@pytest.mark.parametrize(
    ("texts", "labels", "match"),
    [
        (["a b"] * 10, [1] * 9, "differ in length"),
        (["a b"] * 10, [1] * 10, "both classes"),
        (["a b"] * 10, [0] * 10, "both classes"),
        (["a b"] * 8, [1] * 4 + [0] * 4, "at least 5"),
        (["a b"] * 4, [2, 1, 0, 1], "0 .non-member. and 1"),
        (["a b", None, "c d", "e f"], [1, 0, 1, 0], "not strings"),
    ],
)
def test_data_errors(texts, labels, match):
    with pytest.raises(DataError, match=match):
        blind_baseline(texts, labels)


def test_config_errors():
    texts, labels = ["a b"] * 20, [1, 0] * 10
    with pytest.raises(ConfigError):
        blind_baseline(texts, labels, n_runs=0)
    with pytest.raises(ConfigError):
        blind_baseline(texts, labels, test_size=0.0)


def test_wikimia32_matches_sok_figure():
    """SoK (Meeus et al. 2024) report 0.988 ± 0.004 for the bag-of-words baseline."""
    rows = [json.loads(line) for line in WIKIMIA_32.read_text().splitlines() if line.strip()]
    result = blind_baseline([r["input"] for r in rows], [r["label"] for r in rows])
    assert abs(result.auc_mean - 0.988) <= 0.02
    assert {"2023", "2014"} & {w for w, _ in result.top_features}
    assert blind_warning(result) is not None
