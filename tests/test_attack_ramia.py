"""RaMIA: range samples, the trimmed mean and its tuning on hand-computed values, the attack on
known signals, and a real run on the tiny models with a training manifest."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from conftest import quiet_run

from imprint.attacks.ramia import RaMIA, range_samples, trimmed_score, tune_trim
from imprint.attacks.rmia import rmia_scores
from imprint.backends.base import TokenStats
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet
from imprint.training_manifest import IN, OUT, ReferenceModel, ReferenceSet


def test_range_samples_keep_the_centre_and_are_seeded():
    text = "The council met in May and the mayor was there with 12 members."
    r = range_samples(text, 6, 3)
    assert len(r) == 6 and r[0] == text and len(set(r)) == 6
    assert r == range_samples(text, 6, 3)  # the same range in every run
    assert r != range_samples(text, 6, 3, seed=1)
    for variant in r[1:]:  # 1..3 words changed, the word count kept
        a, b = text.split(), variant.split()
        assert len(a) == len(b) and 1 <= sum(x != y for x, y in zip(a, b, strict=True)) <= 3
    # no replaceable word: adjacent swaps; one word: the range repeats the centre
    assert range_samples("Zebras graze quietly", 3, 2)[1] in {
        "graze Zebras quietly",
        "Zebras quietly graze",
    }
    assert range_samples("Zürich", 4, 2) == ("Zürich",) * 4


def test_trimmed_mean_by_hand():
    s = np.array([[0.1, 0.9, 0.5, 0.3], [0.4, 0.4, 0.8, 0.0]])
    # lowest 2: (0.1 + 0.3) / 2 = 0.2, (0.0 + 0.4) / 2 = 0.2; highest 1: 0.9, 0.8; all: means
    assert trimmed_score(s, "lowest", 2) == pytest.approx([0.2, 0.2])
    assert trimmed_score(s, "highest", 1) == pytest.approx([0.9, 0.8])
    assert trimmed_score(s, "lowest", 4) == pytest.approx([0.45, 0.4])


def test_trim_tuning_by_hand():
    # members' ranges hold one high score among low ones; non-members' are flat at 0.5:
    # the highest score separates (AUC 1 at k = 1), the mean of all does not (0.3 vs 0.5 loses)
    scores = np.array([[0.9, 0.1, 0.1], [0.8, 0.2, 0.0], [0.5, 0.5, 0.5], [0.5, 0.5, 0.5]])
    labels = np.array([IN, IN, OUT, OUT])
    assert tune_trim(scores, labels) == ("highest", 1, 1.0)
    # members' ranges are high throughout, non-members' hold one spike: the lowest separates
    spiky = np.array([[0.9, 0.8, 0.9], [0.7, 0.9, 0.8], [0.95, 0.1, 0.1], [0.1, 0.92, 0.2]])
    assert tune_trim(spiky, labels) == ("lowest", 1, 1.0)
    with pytest.raises(ConfigError, match="no IN or no OUT"):
        tune_trim(scores, np.array([IN] * 4))


def _stats(value: float) -> TokenStats:
    n = 2
    return TokenStats(
        token_ids=np.zeros(n, np.int32),
        logp=np.full(n, value, np.float32),
        mean_logp=np.zeros(n, np.float32),
        var_logp=np.ones(n, np.float32),
        rank=np.ones(n, np.int32),
        argmax=np.zeros(n, np.int32),
    )


def test_attack_on_known_signals_by_hand():
    # 2 candidates, ranges of 2, 2 reference models; online RMIA per range sample, z = the
    # candidates' range samples, then the fixed trim "highest:1"
    texts = ["a b", "c d"]
    attack = RaMIA(models=("r0", "r1"), sample_size=2, modes=("online",), trim="highest:1")
    run_refs = ReferenceSet(
        (ReferenceModel("r0", "s0", frozenset({"0"})), ReferenceModel("r1", "s1", frozenset({"1"})))
    )
    from imprint.attacks.base import RunContext
    from imprint.data.sample import Sample

    samples = [Sample(str(i), t, i % 2) for i, t in enumerate(texts)]
    attack = attack.prepare(samples, RunContext(references=run_refs)).attack
    v = attack.variant
    tgt = np.array([[-1.0, -2.0], [-3.0, -1.5]])
    r0 = np.array([[-1.5, -2.5], [-2.0, -2.0]])
    r1 = np.array([[-2.0, -2.0], [-2.5, -1.0]])
    data = {
        Need(variant=v): [tuple(_stats(x) for x in row) for row in tgt],
        Need(model="r0", variant=v): [tuple(_stats(x) for x in row) for row in r0],
        Need(model="r1", variant=v): [tuple(_stats(x) for x in row) for row in r1],
    }
    got = attack.score(SignalSet(texts, data))["ramia_online"]
    member = np.repeat(np.array([[IN, OUT], [OUT, IN]]), 2, axis=1)
    refs = np.stack([r0.ravel(), r1.ravel()])
    s = rmia_scores(tgt.ravel(), refs, member, tgt.ravel(), refs, member, offline=False).reshape(
        2, 2
    )
    assert got == pytest.approx(s.max(axis=1))
    # by hand for sample (0, 0): log LR = -1 - log((e^-1.5 + e^-2) / 2) = 0.7256; the four
    # log LRs are 0.7256, 0.2500, -0.8256, -0.0256 -> 3 of 4 below 0.7256 -> 0.75
    assert s[0, 0] == pytest.approx(0.75)


def test_parameters_are_checked():
    with pytest.raises(ConfigError, match="trim"):
        RaMIA(models=("a", "b"), trim="middle:2")
    with pytest.raises(ConfigError, match="sample_size"):
        RaMIA(models=("a", "b"), trim="lowest:11")
    with pytest.raises(ConfigError, match="at least 2 reference models"):
        RaMIA(models=("a",))
    RaMIA(models=("a",), a=0.5, trim="none")


def test_end_to_end_with_a_training_manifest(tiny_model_dir, tiny_ref_dir, tmp_path):
    from conftest import make_tiny_model

    texts = [
        "The council met in May and the mayor was there.",
        "In 2023 the council met in Seoul to discuss the budget.",
        "Hurricane Ana was the second tropical cyclone to threaten Hawaii.",
        "Membership inference asks whether a text was in the training data.",
        "The quick brown fox jumps over the lazy dog in the park.",
        "Numbers like 1, 10 and 100 appear in many documents; so do dates.",
    ]
    data = tmp_path / "d.jsonl"
    rows = [{"text": t, "label": i % 2} for i, t in enumerate(texts)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ids = [f"d:{i + 1}" for i in range(len(texts))]
    third = make_tiny_model(tmp_path / "third", seed=2)
    models = [
        {"name": "r0", "spec": str(tiny_ref_dir), "members": ids[:3]},
        {"name": "r1", "spec": str(third), "members": ids[3:]},
    ]
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"models": models}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = quiet_run(
            tiny_model_dir,
            data,
            tmp_path / "run",
            references=str(manifest),
            attacks=("ramia",),
            params={"ramia": {"sample_size": 4, "trim": "none", "a": 0.5}},
            n_bootstrap=20,
        )
    scores = result.scores["ramia"]
    assert scores.shape == (len(texts),) and np.isfinite(scores).all()
    assert ((scores >= 0) & (scores <= 1)).all()
    passes = result.manifest["requests"]
    assert passes["target"]["logprobs"]["executed"] >= 2 * len(texts)  # centre + variants


def test_tuned_a_and_trim_on_known_signals():
    # 8 candidates, ranges of 3, 4 reference models in pairs; a member's range carries the
    # training shift in its centre only. a and the trim are tuned on model r0 (attacked by the
    # others): the result equals rmia offline at that a, trimmed as tune_trim chooses
    from imprint.attacks.base import RunContext
    from imprint.attacks.rmia import tune_offline_a
    from imprint.data.sample import Sample

    rng = np.random.default_rng(3)
    n, size, k = 8, 3, 4
    member = np.zeros((k, n), dtype=int)
    member[0, :4], member[2, ::2] = 1, 1
    member[1], member[3] = 1 - member[0], 1 - member[2]
    base = rng.normal(-3, 0.3, size=(n, size))

    def signal(is_in):
        shift = np.zeros((n, size))
        shift[:, 0] = 0.5 * is_in
        return base + shift + rng.normal(0, 0.02, (n, size))

    truth = np.array([1, 0] * 4)
    tgt, refs = signal(truth), np.stack([signal(member[j]) for j in range(k)])
    names = tuple(f"r{j}" for j in range(k))
    texts = [f"text {i}" for i in range(n)]
    samples = [Sample(str(i), t, int(truth[i])) for i, t in enumerate(texts)]
    refset = ReferenceSet(
        tuple(
            ReferenceModel(m, "s", frozenset(str(i) for i in range(n) if member[j, i]))
            for j, m in enumerate(names)
        )
    )
    attack = (
        RaMIA(models=names, sample_size=size).prepare(samples, RunContext(references=refset)).attack
    )
    v = attack.variant
    data = {Need(variant=v): [tuple(_stats(x) for x in row) for row in tgt]}
    for j, m in enumerate(names):
        data[Need(model=m, variant=v)] = [tuple(_stats(x) for x in row) for row in refs[j]]
    got = attack.score(SignalSet(texts, data))["ramia"]
    flat_m, flat_r = np.repeat(member, size, axis=1), refs.reshape(k, -1)
    rest = [1, 2, 3]
    zr, zm = flat_r[rest], flat_m[rest]
    a, _ = tune_offline_a(flat_r[0], zr, zm, flat_r[0], zr, zm, flat_m[0])
    pseudo = rmia_scores(flat_r[0], zr, zm, flat_r[0], zr, zm, offline=True, a=a)
    side, kk, _ = tune_trim(pseudo.reshape(n, size), member[0])
    s = rmia_scores(tgt.ravel(), flat_r, flat_m, tgt.ravel(), flat_r, flat_m, offline=True, a=a)
    assert got == pytest.approx(trimmed_score(s.reshape(n, size), side, kk))
    assert np.isfinite(got).all()
