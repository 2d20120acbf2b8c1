"""Issue 34: the bf16 accuracy gate (AUC, TPR at the lowest measurable FPR, Spearman per set), the
fused head against the plain reduction, the speed probe's cache, and the request store never
answering one dtype's requests with the other's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from imprint.backends import dtype_probe
from imprint.backends.base import ScoreRequest
from imprint.backends.bf16_gates import (
    BF16_PATH,
    evaluate,
    load_results,
    record,
    tpr_texts_at_lowest_fpr,
)
from imprint.backends.hf import HFLogprobBackend
from imprint.backends.reduce import fused_head_stats, reduce_logits

DIMS = {"hidden": 8, "kv": 4, "intermediate": 16, "vocab": 64, "layers": 2}


def _labelled(n: int = 120, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 2
    return labels, rng.normal(size=n) + 0.8 * labels


def test_identical_scores_pass_and_a_reordered_column_fails_naming_it() -> None:
    labels, scores = _labelled()
    fp32 = {"wiki": {"loss": scores, "zlib": scores * 2}, "zh": {"loss": scores[:30]}}
    same = evaluate(fp32, fp32, {"wiki": labels})
    assert same["passed"] and same["columns"]["loss"]["auc_diff"]["wiki"] == 0.0
    assert "zh" not in same["columns"]["loss"]["auc_diff"]  # no labels, no AUC
    shuffled = np.random.default_rng(1).permutation(scores[:30])
    bad = {"wiki": fp32["wiki"], "zh": {"loss": shuffled}}  # only the unlabelled set moves
    out = evaluate(fp32, bad, {"wiki": labels})
    assert not out["passed"] and not out["columns"]["loss"]["passed"]
    assert out["columns"]["zlib"]["passed"]
    assert out["worst"]["spearman"][:2] == ["loss", "zh"]


def test_the_tpr_criterion_counts_member_texts_at_the_lowest_measurable_fpr() -> None:
    labels, scores = _labelled()
    bound, detected = tpr_texts_at_lowest_fpr(labels, scores)
    assert bound == pytest.approx(4 / 60)  # the four-false-positive rule, 60 non-members
    # lift the best-scoring member below the threshold: one fewer member detected
    moved = scores.copy()
    members = np.flatnonzero(labels == 1)
    top_member = members[np.argmax(scores[members])]
    moved[top_member] = scores.min() - 1
    assert tpr_texts_at_lowest_fpr(labels, moved)[1] == detected - 1
    out = evaluate({"w": {"loss": scores}}, {"w": {"loss": moved}}, {"w": labels})
    assert out["columns"]["loss"]["tpr_diff_texts"]["w"] == 1  # within the gate: one text
    assert out["columns"]["loss"]["auc_diff"]["w"] > 0.005  # but the AUC moved too far
    assert not out["passed"]


def test_gate_results_round_trip_and_new_weights_void_old_gates(tmp_path: Path) -> None:
    path = tmp_path / "gates.json"
    labels, scores = _labelled()
    gate = {**evaluate({"w": {"loss": scores}}, {"w": {"loss": scores}}, {"w": labels})}
    record("fam", "fp1", DIMS, "avx512_bf16", {**gate, "texts": "t"}, path=path)
    record("fam", "fp1", DIMS, "amx_bf16", {**gate, "texts": "t"}, path=path)
    families = load_results(path)
    assert set(families["fam"]["cpu_kinds"]) == {"avx512_bf16", "amx_bf16"}
    record("fam", "fp2", DIMS, "amx_bf16", {**gate, "texts": "t"}, path=path)
    assert set(load_results(path)["fam"]["cpu_kinds"]) == {"amx_bf16"}


def test_a_gate_records_the_path_it_was_measured_on(tmp_path: Path) -> None:
    """bench_bf16.py passes the backend's scoring variant: a gate measured on the fused head (or
    any path but the default) is written under that path, never under the default's name."""
    from imprint.backends.bf16_gates import FUSED_HEAD_PATH

    path = tmp_path / "gates.json"
    labels, scores = _labelled()
    gate = {**evaluate({"w": {"loss": scores}}, {"w": {"loss": scores}}, {"w": labels})}
    record("fam", "fp1", DIMS, "avx512_bf16", {**gate, "texts": "t"}, path=path)
    assert load_results(path)["fam"]["cpu_kinds"]["avx512_bf16"]["bf16_path"] == BF16_PATH
    fused = {**gate, "texts": "t"}
    record("fam", "fp1", DIMS, "avx512_bf16", fused, bf16_path=FUSED_HEAD_PATH, path=path)
    assert load_results(path)["fam"]["cpu_kinds"]["avx512_bf16"]["bf16_path"] == FUSED_HEAD_PATH


@pytest.mark.parametrize("softcap", [None, 30.0])
@pytest.mark.parametrize("compiled", [False, True])
def test_fused_head_gives_the_reductions_statistics(softcap: float | None, compiled: bool) -> None:
    """float32 weights, so both sides are exact up to summation order; several vocabulary
    slices and position blocks, a ragged last slice, a bias."""
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(1001, 24, generator=gen)
    bias = torch.randn(1001, generator=gen)
    hidden = torch.randn(300, 24, generator=gen) * 2
    targets = torch.randint(0, 1001, (300,), generator=gen)
    logits = torch.nn.functional.linear(hidden, weight, bias)
    if softcap:
        logits = torch.tanh(logits / softcap) * softcap
    want = reduce_logits(logits, targets)
    got = fused_head_stats(
        hidden, targets, weight, bias, softcap=softcap, compiled=compiled, slice_rows=128
    )
    for key in ("logp", "mean_logp", "var_logp", "top1_logp"):
        torch.testing.assert_close(got[key], want[key], rtol=1e-4, atol=1e-4)
    assert torch.equal(got["argmax"], want["argmax"])
    # the target's logit comes from a dot product, the others from the GEMM: a near-tie may
    # land on either side, never further
    assert (got["rank"] - want["rank"]).abs().max() <= 1
    assert (got["rank"] == want["rank"]).float().mean() > 0.99


def test_the_probe_runs_once_per_machine_and_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = []
    real = dtype_probe.measure

    def counted(dims: dict[str, int]) -> dict[str, float]:
        calls.append(dims)
        return real(dims, rows=4, reps=1)

    monkeypatch.setattr(dtype_probe, "measure", counted)
    first = dtype_probe.cached_speedup("fp1", DIMS, root=tmp_path)
    assert dtype_probe.cached_speedup("fp1", DIMS, root=tmp_path) == first and len(calls) == 1
    dtype_probe.cached_speedup("fp2", DIMS, root=tmp_path)  # other weights: measured anew
    assert len(calls) == 2
    assert len(list((tmp_path / "dtype-probe").glob("*.json"))) == 2


def test_the_store_never_answers_bf16_requests_with_fp32_answers(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fp32 then bf16 on the same texts into one store: every bf16 request is executed, none
    read back, and the bf16 scores are bf16's own (a second bf16 pass reads them back)."""
    from imprint.attacks import build_attacks
    from imprint.signals.cache import SignalCache
    from imprint.signals.plan import run_plan

    monkeypatch.setenv("IMPRINT_NO_COMPILE", "1")  # eager bf16: the store is the point here
    texts = ["The river flows east.", "Кошка спала на окне.", "长江是中国最长的河流。"]
    needs = [need for a in build_attacks(["loss", "min_k_pp"]) for need in a.needs()]
    cache = SignalCache(tmp_path / "store.sqlite")
    fp32 = HFLogprobBackend(str(tiny_model_dir), device="cpu", dtype="float32")
    bf16 = HFLogprobBackend(str(tiny_model_dir), device="cpu", dtype="bfloat16")
    assert fp32.fingerprint != bf16.fingerprint
    s32, r32 = run_plan(texts, needs, {"target": fp32}, cache)
    s16, r16 = run_plan(texts, needs, {"target": bf16}, cache)
    again, r_again = run_plan(texts, needs, {"target": bf16}, cache)
    counts32, counts16 = r32.per_model["target"], r16.per_model["target"]
    assert counts32.executed == counts16.executed == counts16.requests > 0
    assert counts16.cache_hits == 0
    assert r_again.per_model["target"].cache_hits == counts16.requests
    need = needs[0]
    direct = bf16.score([ScoreRequest(t) for t in texts])
    for i, stats in enumerate(direct):
        np.testing.assert_array_equal(s16.variants(need)[i][0].logp, stats.logp)
        np.testing.assert_array_equal(again.variants(need)[i][0].logp, stats.logp)
        assert not np.array_equal(s32.variants(need)[i][0].logp, stats.logp)
    cache.close()


def test_the_reports_provenance_table_says_which_dtype_ran_and_why() -> None:
    from imprint.report.provenance import provenance, provenance_rows

    reason = "auto on CPU: bfloat16; the CPU has avx512_bf16, smollm2-135m passed ..."
    entry = {
        "spec": "smollm2-135m",
        "fingerprint": "f",
        "dtype": {"dtype": "bfloat16", "reason": reason},
    }
    rows = provenance_rows(provenance({"models": {"target": entry}}, argv=["imprint", "run"]))
    assert ["model dtype (target)", f"bfloat16: {reason}"] in rows
    served = provenance_rows(provenance({"models": {"target": {"model": "openai:x"}}}, argv=[]))
    assert not [r for r in served if r[0].startswith("model dtype")]  # a server's dtype is unknown


def test_auto_on_an_avx512_bf16_cpu_follows_smollm2s_shipped_gate(
    real_bf16_gates: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped gate result, read as a run reads it: smollm2-135m on an avx512_bf16 CPU (this
    CPU kind's flags, a probe that finds bf16 faster) loads in bf16 if its gate passed, else in
    float32 with the failing columns named; the manifest says which and why. (Measured on an
    AMD EPYC, 2026-12-07, default path: every column failed on some set, lowest Spearman 0.976,
    zlib on the 8 long texts; min_k_pp 0.9956 on Chinese.)"""
    from imprint.backends import dtype_choice
    from imprint.backends.bf16_gates import load_results

    monkeypatch.setenv("IMPRINT_CACHE_DIR", str(Path.home() / ".cache" / "imprint"))
    monkeypatch.setattr(dtype_choice, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    monkeypatch.setattr(dtype_probe, "cached_speedup", lambda fingerprint, dims, root: 2.5)
    gate = load_results()["smollm2-135m"]["cpu_kinds"]["avx512_bf16"]
    backend = HFLogprobBackend("smollm2-135m", device="cpu")
    reason = backend.describe()["dtype"]["reason"]
    if gate["bf16_path"] != BF16_PATH:  # measured on another bf16 path: it does not count
        assert backend.model.dtype == torch.float32
        assert "no bf16 accuracy gate is recorded for these weights on avx512_bf16" in reason
    elif gate["passed"]:
        assert backend.model.dtype == torch.bfloat16
        assert reason.startswith("auto on CPU: bfloat16; the CPU has avx512_bf16, smollm2-135m")
        assert "2.50x as fast as float32" in reason
    else:
        failed = sorted(c for c, e in gate["columns"].items() if not e["passed"])
        assert backend.model.dtype == torch.float32
        assert "failed the accuracy gate for smollm2-135m on avx512_bf16" in reason
        assert f"columns {', '.join(failed)};" in reason
    pinned = HFLogprobBackend("smollm2-135m", device="cpu", dtype="bfloat16")
    assert pinned.model.dtype == torch.bfloat16 and pinned.fingerprint != backend.fingerprint


def test_imprint_run_without_dtype_follows_the_gate_recorded_for_the_default_path(
    real_bf16_gates: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``imprint run --model smollm2-135m`` without ``--dtype`` on an avx512_bf16 CPU (the AMD
    EPYC kind the shipped gate was measured on; a probe that finds bf16 faster) loads the dtype
    the shipped record gives the *default* bf16 path, and says why in the manifest and in the
    report's Provenance block (right under its header line). The record must be the default
    path's: one measured on another path (the fused head's, until 2026-12-07) counts as none."""
    import json

    from typer.testing import CliRunner

    from imprint.backends import dtype_choice
    from imprint.cli import app
    from imprint.report.render import md_escape

    gate = load_results()["smollm2-135m"]["cpu_kinds"]["avx512_bf16"]
    assert gate["bf16_path"] == BF16_PATH, "the shipped smollm2 gate is not the default path's"
    monkeypatch.setenv("IMPRINT_CACHE_DIR", str(Path.home() / ".cache" / "imprint"))
    monkeypatch.setattr(dtype_choice, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    monkeypatch.setattr(dtype_probe, "cached_speedup", lambda fingerprint, dims, root: 2.5)
    out = tmp_path / "run"
    flags = ["--model", "smollm2-135m", "--data", "wikimia:32", "--attacks", "loss"]
    flags += ["--n-per-label", "4", "--out", str(out), "--cache", str(tmp_path / "s.sqlite")]
    result = CliRunner().invoke(app, ["run", *flags])
    assert result.exit_code == 0, result.output
    entry = json.loads((out / "manifest.json").read_text())["models"]["target"]["dtype"]
    assert entry["requested"] == "auto"
    assert entry["dtype"] == ("bfloat16" if gate["passed"] else "float32")
    reason = entry["reason"]
    if gate["passed"]:
        assert "smollm2-135m passed the bf16 accuracy gate on avx512_bf16" in reason
    else:
        failed = sorted(c for c, e in gate["columns"].items() if not e["passed"])
        assert "bf16 failed the accuracy gate for smollm2-135m on avx512_bf16" in reason
        assert f"columns {', '.join(failed)};" in reason
    assert f"measured {gate['measured']} on {gate['cpu']}" in reason
    report = (out / "report.md").read_text(encoding="utf-8")
    header, provenance = report.index("Model smollm2-135m"), report.index("model dtype (target)")
    assert header < provenance and md_escape(f"{entry['dtype']}: {reason}") in report
