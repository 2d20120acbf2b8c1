"""RMIA's offline a (issue 19, item 2): tuned on the reference models by default, as the authors'
Privacy Meter does when no a is set (a reference model plays the target, a over 0.0..1.0 chosen
by its AUC), instead of a fixed 0.3 presented as the authors' default."""

from __future__ import annotations

import numpy as np
import pytest

from imprint.attacks import RunContext, build_attacks
from imprint.attacks.base import hyperparameters
from imprint.attacks.rmia import A_GRID, rmia_scores, tune_offline_a
from imprint.backends.base import TokenStats
from imprint.data import Sample
from imprint.errors import ConfigError
from imprint.metrics import auc
from imprint.signals.needs import Need, SignalSet
from imprint.training_manifest import ReferenceModel, ReferenceSet


def test_tuning_by_hand():
    """Candidates A (IN for the model playing the target) and B (OUT); one other reference model,
    OUT for both; the candidates are the population. With Pr0 = (0.2, 0.4), Pr1 = (0.1, 0.5):
    LR(A) > LR(B) iff 0.2 / (1.1 - 0.9a) > 0.4 / (1.5 - 0.5a) iff a > 0.14 / 0.26 = 0.538, so the
    AUC is 0 for a <= 0.5 and 1 for a >= 0.6, and the smallest best a is 0.6."""
    pseudo = np.log([0.2, 0.4])
    refs, member = np.log([[0.1, 0.5]]), np.array([[0, 0]])
    a, aucs = tune_offline_a(pseudo, refs, member, pseudo, refs, member, np.array([1, 0]))
    assert a == 0.6
    assert aucs == [0.0] * 6 + [1.0] * 5
    # C (unknown membership, Pr0 = Pr1 = 0.3) joins the population but not the AUC. LR at
    # a = 0.8: A 1.053, B 0.727, C 0.811; at 1.0: 2, 0.8, 1; at 0.5: 0.615, 0.640, 0.632.
    # AUC 1, 1, 0: the tie between 0.8 and 1.0 goes to the first grid value
    cand, cand_refs = np.log([0.2, 0.4, 0.3]), np.log([[0.1, 0.5, 0.3]])
    out = np.array([[0, 0, 0]])
    a, aucs = tune_offline_a(
        cand, cand_refs, out, cand, cand_refs, out, np.array([1, 0, -1]), grid=(0.8, 1.0, 0.5)
    )
    assert (a, aucs) == (0.8, [1.0, 1.0, 0.0])
    with pytest.raises(ConfigError, match="rmia.a=VALUE"):  # no OUT candidate: no AUC
        tune_offline_a(pseudo, refs, member, pseudo, refs, member, np.array([1, 1]))


def simulate(seed: int = 0, n: int = 400, k: int = 4, m: int = 200):
    """Texts of widely varying difficulty (mean log p ~ N(-3, 1)), a small membership effect
    (+0.3) and model noise (sd 0.15): the target and K reference models on paired random halves,
    m population texts trained by no model."""
    rng = np.random.default_rng(seed)
    hard, hard_z = rng.normal(-3.0, 1.0, n), rng.normal(-3.0, 1.0, m)
    member = []
    for _ in range(k // 2):
        half = np.zeros(n, dtype=int)
        half[rng.permutation(n)[: n // 2]] = 1
        member += [half, 1 - half]
    member_arr = np.array(member)
    labels = rng.permutation(np.repeat([0, 1], n // 2))

    def signal(inside: np.ndarray) -> np.ndarray:
        return hard + 0.3 * inside + rng.normal(0, 0.15, n)

    refs = np.stack([signal(row) for row in member_arr])
    target = signal(labels)
    ref_z = hard_z + rng.normal(0, 0.15, (k, m))
    target_z = hard_z + rng.normal(0, 0.15, m)
    return target, refs, member_arr, target_z, ref_z, labels


def test_tuned_a_beats_the_fixed_0_3_in_a_simulation():
    target, refs, member, target_z, ref_z, labels = simulate()
    out_z = np.zeros(ref_z.shape, dtype=int)
    # reference 0 plays the target, references 1..3 are its references
    a, aucs = tune_offline_a(
        refs[0], refs[1:], member[1:], ref_z[0], ref_z[1:], out_z[1:], member[0]
    )
    assert a >= 0.8 and max(aucs) > aucs[A_GRID.index(0.3)] + 0.1

    def offline_auc(value: float) -> float:
        scores = rmia_scores(target, refs, member, target_z, ref_z, out_z, offline=True, a=value)
        return auc(labels, scores)

    online = auc(labels, rmia_scores(target, refs, member, target_z, ref_z, out_z, offline=False))
    loss = auc(labels, target)
    # measured: LOSS 0.64, a = 0.3 0.65, tuned a 0.88, online 0.88
    assert offline_auc(0.3) < loss + 0.03
    assert offline_auc(a) > offline_auc(0.3) + 0.15
    assert offline_auc(a) > online - 0.03


def _stats(value: float) -> TokenStats:
    return TokenStats(
        token_ids=np.arange(2, dtype=np.int32),
        logp=np.array([value, value], dtype=np.float32),
        mean_logp=np.full(2, -2.0, dtype=np.float32),
        var_logp=np.ones(2, dtype=np.float32),
        rank=np.ones(2, dtype=np.int32),
        argmax=np.zeros(2, dtype=np.int32),
    )


class FakeRequests:
    """The run's request client, answering token statistics from a table (role -> text -> v)."""

    def __init__(self, table: dict[str, dict[str, float]]) -> None:
        self.table = table
        self.asked: list[str] = []

    def token_stats(self, role: str, texts, *, prefix=None):
        self.asked.append(role)
        return [_stats(self.table[role][t]) for t in texts]


def _attack_setup(n: int = 120):
    target, refs, member, target_z, ref_z, labels = simulate(n=n, m=60)
    samples = [Sample(f"s{i}", f"text {i}", int(labels[i])) for i in range(n)]
    population = tuple(f"population {j}" for j in range(len(target_z)))
    models = tuple(
        ReferenceModel(f"r{r}", "spec", frozenset(f"s{i}" for i in range(n) if member[r, i]))
        for r in range(len(refs))
    )
    table = {"target": {}, **{f"r{r}": {} for r in range(len(refs))}}
    for i, s in enumerate(samples):
        table["target"][s.text] = float(target[i])
        for r in range(len(refs)):
            table[f"r{r}"][s.text] = float(refs[r, i])
    for j, text in enumerate(population):
        table["target"][text] = float(target_z[j])
        for r in range(len(refs)):
            table[f"r{r}"][text] = float(ref_z[r, j])
    return samples, ReferenceSet(models, population), table


def test_the_attack_tunes_a_records_it_and_scores_with_it():
    samples, refset, table = _attack_setup()
    requests = FakeRequests(table)
    run = RunContext(references=refset, requests=requests)  # type: ignore[arg-type]
    (rmia,) = build_attacks(["rmia"], run)
    assert rmia.a == "auto"
    prepared = rmia.prepare(samples, run).attack
    tuning = prepared.a_tuning
    assert tuning["target"] == "r0" and tuning["grid"] == list(A_GRID)
    assert (
        tuning["a"]
        == A_GRID[int(np.nanargmax([np.nan if v is None else v for v in tuning["auc"]]))]
    )
    record = hyperparameters(prepared)
    assert record["a"] == "auto" and record["a_tuning"]["a"] == tuning["a"]
    texts = [s.text for s in samples]
    data = {Need(): [(_stats(table["target"][t]),) for t in texts]}
    for role in refset.names:
        data[Need(model=role)] = [(_stats(table[role][t]),) for t in texts]
    scores = prepared.score(SignalSet(texts, data))["rmia_offline"]
    # the same attack with a fixed at the tuned value scores identically, 0.3 does not
    fixed = build_attacks(["rmia"], run, params={"rmia": {"a": tuning["a"]}})[0]
    fixed = fixed.prepare(samples, run).attack
    assert fixed.a_tuning is None
    assert np.array_equal(fixed.score(SignalSet(texts, data))["rmia_offline"], scores)
    low = build_attacks(["rmia"], run, params={"rmia": {"a": 0.3}})[0].prepare(samples, run)
    labels = np.array([s.label for s in samples])
    assert auc(labels, scores) > auc(
        labels, low.attack.score(SignalSet(texts, data))["rmia_offline"]
    )


def test_a_parameter_forms_and_when_tuning_is_impossible():
    samples, refset, table = _attack_setup(n=20)
    run = RunContext(references=refset, requests=FakeRequests(table))  # type: ignore[arg-type]
    for given, want in [("auto", "auto"), ("0.5", 0.5), (1, 1.0)]:
        (rmia,) = build_attacks(["rmia"], run, params={"rmia": {"a": given}})
        assert rmia.a == want
    for bad in ("tuned", 1.5, -0.1):
        with pytest.raises(ConfigError, match="rmia"):
            build_attacks(["rmia"], run, params={"rmia": {"a": bad}})
    # online only: nothing to tune, no request made for it
    requests = FakeRequests(table)
    run = RunContext(references=refset, requests=requests)  # type: ignore[arg-type]
    (online,) = build_attacks(["rmia"], run, params={"rmia": {"modes": ("online",)}})
    assert online.prepare(samples, run).attack.a_tuning is None
    assert requests.asked == ["target", "r0", "r1", "r2", "r3"]  # the population texts only
    # one reference model: nothing to attack it with
    one = ReferenceSet(refset.models[:1], refset.population)
    run = RunContext(references=one, requests=FakeRequests(table))  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="at least 2 reference models.*rmia.a=VALUE"):
        build_attacks(["rmia"], run)  # when the attacks are built, before any model loads
    # no model both IN and OUT for some candidates (one trained on all, one on none): no AUC
    ids = frozenset(s.id for s in samples)
    split = (ReferenceModel("r0", "s", ids), ReferenceModel("r1", "s", frozenset()))
    run = RunContext(references=ReferenceSet(split), requests=FakeRequests(table))  # type: ignore[arg-type]
    (rmia,) = build_attacks(["rmia"], run)
    with pytest.raises(ConfigError, match="IN for some candidates and OUT for others"):
        rmia.prepare(samples, run)
