"""Core attacks against hand-computed values on known log-probs; registry behaviour."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from imprint.attacks import RunContext, available_attacks, build_attacks, get_attack_class
from imprint.attacks.base import register
from imprint.backends.base import TokenStats
from imprint.errors import ConfigError
from imprint.signals.needs import LOWER, Need, SignalSet


def stats(logp, mean=None, var=None) -> TokenStats:
    n = len(logp)
    return TokenStats(
        token_ids=np.arange(n, dtype=np.int32),
        logp=np.array(logp, dtype=np.float32),
        mean_logp=np.array(mean if mean is not None else [-1.0] * n, dtype=np.float32),
        var_logp=np.array(var if var is not None else [1.0] * n, dtype=np.float32),
        rank=np.ones(n, dtype=np.int32),
        argmax=np.zeros(n, dtype=np.int32),
    )


TEXTS = ["Alpha Beta", "gamma delta epsilon"]
X = [stats([-1.0, -2.0, -3.0, -6.0]), stats([-0.5, -0.5, -4.0, -1.0, -2.0])]
LOW = [stats([-2.0, -2.0, -4.0, -8.0]), stats([-0.5, -0.5, -4.0, -1.0, -2.0])]
REF = [stats([-2.0, -2.0, -2.0, -2.0]), stats([-1.0, -1.0, -1.0, -1.0, -1.0])]


def signal_set() -> SignalSet:
    wrap = lambda xs: [(s,) for s in xs]  # noqa: E731
    return SignalSet(
        TEXTS, {Need(): wrap(X), Need(variant=LOWER): wrap(LOW), Need(model="r"): wrap(REF)}
    )


def score(name: str, run: RunContext | None = None, **params):
    (attack,) = build_attacks([name], run, params={name: params} if params else None)
    return attack.score(signal_set())


def test_loss():
    np.testing.assert_allclose(score("loss")["loss"], [-3.0, -1.6])


def test_zlib_both_variants():
    out = score("zlib")
    sizes = [len(zlib.compress(t.encode())) for t in TEXTS]
    np.testing.assert_allclose(out["zlib"], [-3.0 / sizes[0], -1.6 / sizes[1]])
    np.testing.assert_allclose(out["zlib_char"], [-12.0 / sizes[0], -8.0 / sizes[1]])


def test_lowercase():
    # loss(x)=3, loss(lower x)=4 -> -(3/4); second text unchanged by lowercasing -> -1
    np.testing.assert_allclose(score("lowercase")["lowercase"], [-0.75, -1.0])


def test_reference_difference_and_ratio():
    out = score("ref", RunContext(refs=("r",)))
    np.testing.assert_allclose(out["ref[r]"], [-3.0 + 2.0, -1.6 + 1.0])
    np.testing.assert_allclose(out["ref_ratio[r]"], [-(3.0 / 2.0), -(1.6 / 1.0)])


def test_min_k_and_sweep():
    out = score("min_k", k=0.5, sweep=(0.2, 1.0))
    # k=0.5: 2 lowest of 4 -> mean(-6,-3); of 5 -> floor(2.5)=2 -> mean(-4,-2)
    np.testing.assert_allclose(out["min_k"], [-4.5, -3.0])
    # k=0.2: max(1, floor(0.8))=1 -> -6 ; floor(1.0)=1 -> -4
    np.testing.assert_allclose(out["min_k@0.2"], [-6.0, -4.0])
    np.testing.assert_allclose(out["min_k@1"], [-3.0, -1.6])


def test_min_k_pp_standardises_by_vocabulary_moments():
    s = stats([-1.0, -3.0, -2.0], mean=[-2.0, -2.0, -1.0], var=[4.0, 1.0, 0.25])
    sigs = SignalSet(["a b c"], {Need(): [(s,)]})
    (attack,) = build_attacks(["min_k_pp"], params={"min_k_pp": {"k": 0.67}})
    # z = (0.5, -1, -2); k=0.67 of 3 -> 2 lowest -> mean(-1, -2)
    np.testing.assert_allclose(attack.score(sigs)["min_k_pp"], [-1.5])


def test_min_k_pp_zero_variance_is_finite():
    s = stats([-1.0], mean=[-1.0], var=[0.0])
    (attack,) = build_attacks(["min_k_pp"])
    assert math.isfinite(attack.score(SignalSet(["a"], {Need(): [(s,)]}))["min_k_pp"][0])


def test_validation_and_registry_errors():
    with pytest.raises(ConfigError, match="in \\(0, 1\\]"):
        build_attacks(["min_k"], params={"min_k": {"k": 0.0}})
    with pytest.raises(ConfigError, match="did you mean loss"):
        get_attack_class("lss")
    with pytest.raises(ConfigError, match="no parameter"):
        build_attacks(["loss"], params={"loss": {"k": 1}})
    with pytest.raises(ConfigError, match="--ref"):
        build_attacks(["ref"])
    with pytest.raises(ConfigError, match="already registered"):
        register("loss")(get_attack_class("loss"))


def test_all_skips_reference_attack_without_refs():
    names = {a.name for a in build_attacks(["all"])}
    assert "ref" not in names and {"loss", "zlib", "min_k", "min_k_pp", "lowercase"} <= names
    with_refs = {a.name for a in build_attacks(["all"], RunContext(refs=("r",)))}
    assert "ref" in with_refs


def test_every_attack_declares_paper_and_summary():
    for name, cls in available_attacks().items():
        assert cls.summary and cls.paper, name
