"""CAMIA (Chang et al. 2024): its primitive signals and combiner on hand-computed values, agreement
with a transcription of LeakPro's CAMIA branch on a tiny random Llama's losses of 40 WikiMIA texts
(against 20 reference texts), and an end-to-end run whose reference non-members leave the
evaluation."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import spearmanr

from imprint.attacks.camia import (
    CAMIA,
    HIGHER,
    REPEAT,
    approximate_entropy,
    camia_features,
    camia_scores,
    combine,
    count_below_prev_mean,
    lz_complexity,
    p_values,
    slope,
)
from imprint.errors import ConfigError

WIKIMIA = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikimia"


# -- formulas on hand-computed values ----------------------------------------------------------


def test_slope_is_the_least_squares_slope_of_the_cyclically_extended_losses():
    assert slope(np.array([3.0, 2.0, 1.0]), 3) == pytest.approx(-1.0)
    # [1, 2] extended to [1, 2, 1, 2]: cov 0.25 / var 1.25
    assert slope(np.array([1.0, 2.0]), 4) == pytest.approx(0.2)
    assert slope(np.array([5.0, 1.0, 9.0]), 2) == pytest.approx(-4.0)  # first 2 values only


def test_lempel_ziv_counts_phrases_of_the_binned_losses():
    # 3 bins over [0, 1]: symbols B C B C -> phrases B | C | BC, starting from one: 4
    assert lz_complexity(np.array([0.0, 1.0, 0.0, 1.0]), 3) == 4.0
    assert lz_complexity(np.array([2.0, 2.0, 2.0]), 16) == 1.0  # constant
    assert lz_complexity(np.array([]), 16) == 0.0


def test_count_below_previous_mean_and_approximate_entropy():
    # t=2: 3 <= 1 no; t=3: 1 <= (1+3)/2 yes
    assert count_below_prev_mean(np.array([1.0, 3.0, 1.0])) == pytest.approx(0.5)
    assert count_below_prev_mean(np.array([1.0])) == 0.0
    assert approximate_entropy(np.ones(20), 20) == pytest.approx(0.0, abs=1e-9)
    assert approximate_entropy(np.ones(5), 5) == 0.0  # fewer than m + 2 values
    # alternating 0/1, m = 1, r = 0.5: each of the 10 windows matches 5, phi(1) = log(1/2); at
    # m = 2 five windows [0, 1] match 5 of 9 and four [1, 0] match 4 of 9
    alt = np.array([0.0, 1.0] * 5)
    phi2 = (5 * math.log(5 / 9) + 4 * math.log(4 / 9)) / 9
    assert approximate_entropy(alt, 10, m=1, r=0.5) == pytest.approx(math.log(0.5) - phi2)


def test_p_values_on_both_tails_and_their_clip():
    ref = np.array([[1.0], [2.0], [3.0]])
    low = p_values(np.array([[2.0], [0.0], [np.nan]]), ref, [False])
    assert low[:, 0][:2] == pytest.approx([2 / 4, 1e-5]) and np.isnan(low[2, 0])
    high = p_values(np.array([[2.0], [4.0]]), ref, [True])
    assert high[:, 0] == pytest.approx([2 / 4, 1 / 4])


def test_combination_methods_are_higher_for_smaller_p_values():
    p = np.array([[0.5, 0.25], [0.9, 0.8]])
    assert combine(p, "fisher")[0] == pytest.approx(2 * math.log(8))
    for method in ("fisher", "edgington", "pearson", "george"):
        s = combine(p, method)
        assert s[0] > s[1], method
    assert combine(p, "edgington") == pytest.approx([-0.75, -1.7])
    with pytest.raises(ConfigError, match="camia.combine must be one of"):
        combine(p, "stouffer")


def test_features_of_a_hand_made_text():
    losses = np.array([4.0, 2.0, 1.0, 1.0])
    ids = np.array([7, 8, 7, 9])  # 3 distinct of 4
    rep1 = np.array([4.0, 2.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5])
    rep2 = np.concatenate([rep1, [0.25] * 4])
    f = camia_features(losses, ids, rep1, rep2)
    assert f["cut_T"] == pytest.approx(2.0) and f["cut_200"] == f["cut_T"]
    assert f["cut_T_rep1_diff"] == pytest.approx(2.0 - 1.25)
    assert f["cal_T"] == pytest.approx(2.0 / 0.75)
    assert f["ppl_T_rep2_diff"] == pytest.approx(math.exp(2.0) - math.exp(rep2.mean()))
    assert f["cb_const2.5"] == pytest.approx(0.25)  # one loss of four above 2.5
    assert f["cb_const2.5_rep1_diff"] == pytest.approx(0.25 - 1 / 8)
    assert f["cbm_T"] == pytest.approx(0.25)  # above the mean 2.0: only 4.0
    assert f["cbpm_T"] == pytest.approx(1 - 1.0)  # every later loss <= the mean before it
    assert f["slope_256"] > 0  # minus a falling slope
    assert len(f) == 66


# -- agreement with LeakPro's CAMIA branch -------------------------------------------------------


class LeakProCAMIATranscription:
    """TRANSCRIPTION FOR COMPARISON ONLY (not part of imprint): the feature assembly of
    ``SignalExtractor.gather_signals_for_batch`` and the ``Combiner`` of LeakPro's CAMIA branch
    (``leakpro/attacks/mia_attacks/camia.py``), re-typed to run on given per-token losses. The
    losses of the text and of the text repeated are the inputs (LeakPro computes them itself);
    ``directions`` is LeakPro's per-feature tail setting."""

    cuts = {"T": None, "200": 200, "300": 300}

    @staticmethod
    def replicate(seq, desired):
        if desired is None or not seq or len(seq) >= desired:
            return list(seq)
        out = list(seq)
        while len(out) < desired:
            out.extend(seq[: desired - len(out)])
        return out

    @staticmethod
    def count_below(seq, thr, tp):
        sub = seq if tp is None else seq[:tp]
        return (sum(v <= thr for v in sub) / len(sub)) if sub else 0.0

    @staticmethod
    def count_below_mean(seq):
        if not seq:
            return 0.0
        m = float(np.mean(seq))
        return sum(v <= m for v in seq) / len(seq)

    @staticmethod
    def count_below_prev_mean(sl):
        if len(sl) <= 1:
            return 0.0
        below, csum = 0, sl[0]
        for i, v in enumerate(sl[1:], 1):
            below += v <= csum / i
            csum += v
        return below / (len(sl) - 1)

    @staticmethod
    def lz(seq, bins, tp):
        sub = seq if tp is None else seq[:tp]
        if not sub:
            return 0.0
        arr = np.asarray(sub)
        lo, hi = arr.min(), arr.max()
        if hi - lo < 1e-12:
            return 1.0
        edges = np.linspace(lo, hi + 1e-9, bins)
        symbols = "".join(chr(65 + np.digitize(v, edges)) for v in arr)
        i, c = 0, 1
        while i < len(symbols) - 1:
            width = 1
            while symbols[i : i + width] in symbols[:i] and i + width < len(symbols):
                width += 1
            i += width
            c += 1
        return float(c)

    def slope(self, seq, tp):
        if not seq:
            return 0.0
        y = np.asarray(self.replicate(seq, tp)[:tp])
        x = np.arange(len(y))
        var = np.mean((x - x.mean()) ** 2)
        if var == 0:
            return 0.0
        return float(np.mean((x - x.mean()) * (y - y.mean())) / var)

    def apen(self, seq, tp, m=8, r=0.8):
        seq = self.replicate(seq, tp)[:tp]
        if len(seq) < m + 2:
            return 0.0
        vals = np.asarray(seq)

        def phi(mm):
            n = len(vals) - mm + 1
            pats = np.array([vals[i : i + mm] for i in range(n)])
            c = np.sum(np.max(np.abs(pats[:, None] - pats[None, :]), axis=2) <= r, axis=0) / n
            return np.mean(np.log(c + 1e-12))

        return float(phi(m) - phi(m + 1))

    def features(self, base, ids, rep1, rep2):
        d = {}
        mean = lambda s: float(np.mean(s)) if len(s) else 0.0  # noqa: E731
        diff = lambda a, b: (a - b) if (np.isfinite(a) and np.isfinite(b)) else 0.0  # noqa: E731
        # every cut's repeats are the whole text's here (imprint's stated deviation)
        seqs = {
            tag: (base if tp is None else base[:tp], rep1, rep2) for tag, tp in self.cuts.items()
        }
        for tag, tp in self.cuts.items():
            toks = ids if tp is None else ids[:tp]
            div = max(len(set(toks)) / len(toks) if toks else 0.0, 1e-12)
            vb, vr1, vr2 = map(mean, seqs[tag])
            for fam, post in (
                ("cut", lambda x: x),
                ("cal", lambda x, d=div: x / d),
                ("ppl", lambda x: math.exp(x)),
                ("calppl", lambda x, d=div: math.exp(x) / d),
            ):
                b_, r1_, r2_ = map(post, (vb, vr1, vr2))
                d[f"{fam}_{tag}"] = b_
                d[f"{fam}_{tag}_rep1_diff"] = diff(b_, r1_)
                d[f"{fam}_{tag}_rep2_diff"] = diff(b_, r2_)
        for tau in (2.5, 3.0, 3.5):
            b, r1, r2 = (1 - self.count_below(x, tau, 200) for x in seqs["200"])
            d[f"cb_const{tau}"] = b
            d[f"cb_const{tau}_rep1_diff"] = diff(b, r1)
            d[f"cb_const{tau}_rep2_diff"] = diff(b, r2)
        for tag in self.cuts:
            b, r1, r2 = (1 - self.count_below_mean(x) for x in seqs[tag])
            d[f"cbm_{tag}"] = b
            d[f"cbm_{tag}_rep1_diff"] = diff(b, r1)
            d[f"cbm_{tag}_rep2_diff"] = diff(b, r2)
            d[f"cbpm_{tag}"] = 1 - self.count_below_prev_mean(seqs[tag][0])
        for bins in (16, 32):
            b, r1, r2 = (self.lz(x, bins, 200) for x in seqs["200"])
            d[f"lz_bins{bins}"] = b
            d[f"lz_bins{bins}_rep1_diff"] = diff(r1, b)
            d[f"lz_bins{bins}_rep2_diff"] = diff(r2, b)
        for tp in (256, 512):
            d[f"slope_{tp}"] = -self.slope(base, tp)
        d["apen_256"] = -self.apen(base, 256)
        return d

    @staticmethod
    def score(dicts, nonmember_dicts, directions, clip=1e-5, dtype=np.float32):
        ref = {}
        for dd in nonmember_dicts:
            for k, v in dd.items():
                if np.isfinite(v):
                    ref.setdefault(k, []).append(float(v))
        ref = {k: np.sort(np.asarray(v, dtype=dtype)) for k, v in ref.items()}
        out = []
        for dd in dicts:
            total = 0.0
            for k, v in dd.items():
                if k not in ref or not np.isfinite(v):
                    continue
                arr = ref[k]
                n = arr.size
                rank = np.searchsorted(arr, v, side="right")
                p = (n - rank + 1) / (n + 1) if directions.get(k) == "higher" else rank / (n + 1)
                total += -2.0 * math.log(min(max(p, clip), 1.0 - clip))
            out.append(total)
        return out


def test_camia_agrees_with_the_leakpro_transcription_on_40_texts(tiny_model_dir, one_torch_thread):
    from imprint.backends.hf import HFLogprobBackend
    from imprint.requests.client import in_memory_requests

    rows = [json.loads(x) for x in (WIKIMIA / "WikiMIA_length32.jsonl").open()]
    texts = [r["input"] for r in rows[:60]]
    client = in_memory_requests(HFLogprobBackend(str(tiny_model_dir), device="cpu"))
    base = client.token_stats("target", texts)
    reps = client.token_stats("target", [t for x in texts for t in REPEAT.apply(x)])
    mine = [
        camia_features(-b.logp.astype(float), b.token_ids, -reps[2 * i].logp, -reps[2 * i + 1].logp)
        for i, b in enumerate(base)
    ]
    leak = LeakProCAMIATranscription()
    theirs = [
        leak.features(
            (-b.logp.astype(float)).tolist(),
            b.token_ids.tolist(),
            (-reps[2 * i].logp.astype(float)).tolist(),
            (-reps[2 * i + 1].logp.astype(float)).tolist(),
        )
        for i, b in enumerate(base)
    ]
    feature_gap = max(abs(m[k] - t[k]) for m, t in zip(mine, theirs, strict=True) for k in m)
    assert set(mine[0]) == set(theirs[0]) and feature_gap < 1e-9
    ours = camia_scores(mine[:40], mine[40:])
    directions = {k: "higher" for k in HIGHER}
    for dtype in (np.float64, np.float32):
        ref = np.array(leak.score(theirs[:40], theirs[40:], directions, dtype=dtype))
        gap = float(np.max(np.abs(ours - ref)))
        rho = spearmanr(ours, ref).statistic
        print(
            f"camia vs LeakPro ({np.dtype(dtype).name} reference), 40 texts: "
            f"max |diff| {gap:.2e}, Spearman {rho:.4f}"
        )
        if dtype is np.float64:
            assert gap < 1e-9 and rho == pytest.approx(1.0)
        else:  # LeakPro's float32 reference splits ties of discrete features (shares, counts)
            assert rho > 0.95


# -- a run ----------------------------------------------------------------------------------------


def test_reference_non_members_leave_the_evaluation_and_the_run_scores(tiny_model_dir, tmp_path):
    from conftest import wikimia_subset

    from imprint.run import RunConfig, execute_run

    data = wikimia_subset(tmp_path, 5, 8)
    result = execute_run(
        RunConfig(
            model=str(tiny_model_dir),
            data=str(data),
            attacks=("loss", "camia"),
            params={"camia": {"n_reference": 3}},
            shot_holdout=3,
            n_bootstrap=10,
            progress=False,
            blind=False,
            out=tmp_path / "run",
        )
    )
    assert len(result.samples) == 10  # 13 - 3 held-out reference non-members
    scores = result.scores["camia"]
    assert scores.shape == (10,) and np.all(np.isfinite(scores)) and np.all(scores >= 0)
    assert sum(result.manifest["data"]["dropped"].values()) >= 3


def test_all_includes_camia_only_when_the_run_holds_out_enough_non_members():
    from imprint.attacks import RunContext, build_attacks
    from imprint.attacks.shots import HELDOUT_KEY
    from imprint.data.sample import Sample

    held = tuple(Sample(f"p{i}", f"text {i}", 0) for i in range(10))
    few = RunContext(pools={HELDOUT_KEY: held[:4]})
    assert "camia" not in {a.name for a in build_attacks(["all"], few)}
    assert "camia" in {
        a.name for a in build_attacks(["all"], RunContext(pools={HELDOUT_KEY: held}))
    }
    with pytest.raises(ConfigError, match="n_reference must be >= 2"):
        CAMIA(n_reference=1)
