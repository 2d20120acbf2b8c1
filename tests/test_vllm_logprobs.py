"""vLLM prompt log-probs: the conversion by hand, the refusal of full-vocabulary attacks before any
work, and a run whose vLLM scores equal the hf backend's (through tests/vllm_standin.py, which
computes the prompt log-probs with the same tiny model; vLLM itself is not installable here)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from typer.testing import CliRunner

from imprint.attacks import RunContext, build_attacks
from imprint.backends.base import ScoreRequest
from imprint.backends.hf import HFLogprobBackend
from imprint.backends.vllm_logprobs import stats_from_prompt_logprobs
from imprint.cli import app
from imprint.errors import ConfigError


def lp(logprob: float, rank: int) -> SimpleNamespace:
    return SimpleNamespace(logprob=logprob, rank=rank)


def test_conversion_by_hand() -> None:
    ids = [1, 5, 7, 9]
    out = [
        None,
        {5: lp(-0.5, 1)},
        {7: lp(-2.0, 3), 4: lp(-0.1, 1)},
        {9: lp(-1.0, 2), 3: lp(-0.7, 1)},
    ]
    stats = stats_from_prompt_logprobs(ids, out, first=1)
    assert stats.token_ids.tolist() == [5, 7, 9]
    np.testing.assert_allclose(stats.logp, [-0.5, -2.0, -1.0])
    assert stats.rank.tolist() == [1, 3, 2] and stats.argmax.tolist() == [5, 4, 3]
    np.testing.assert_allclose(stats.top1_logp, [-0.5, -0.1, -0.7])
    assert np.isnan(stats.mean_logp).all() and np.isnan(stats.var_logp).all()
    after_prefix = stats_from_prompt_logprobs(ids, out, first=2)  # ids[1] is context only
    assert after_prefix.token_ids.tolist() == [7, 9]
    with pytest.raises(ConfigError, match="position 2"):
        stats_from_prompt_logprobs(ids, [None, out[1], {4: lp(-0.1, 1)}, out[3]], first=1)
    with pytest.raises(ConfigError, match="3 prompt log-probs for 4"):
        stats_from_prompt_logprobs(ids, out[:3], first=1)


def test_full_vocabulary_attacks_are_refused_before_any_work() -> None:
    run = RunContext(target_access="token-logprobs")
    with pytest.raises(ConfigError, match=r"\['min_k_pp', 'surp'\].*hf backend"):
        build_attacks(["loss", "min_k_pp", "surp"], run)
    names = [a.name for a in build_attacks(["all"], run)]
    assert {"loss", "zlib", "min_k", "lowercase"} <= set(names)
    assert not {"min_k_pp", "surp", "dc_pdd", "gradnorm"} & set(names)


def _texts(path: Path) -> Path:
    texts = [
        "Kraków leży nad Wisłą i ma wiele zabytków",
        "北京是中国的首都也是文化中心",
        "Hurricane Ana",
    ]
    texts += ["Москва столица России", "the cat sat on the mat again", "مرحبا بالعالم الكبير"]
    path.write_text(
        "".join(
            json.dumps({"text": t, "label": i % 2}, ensure_ascii=False) + "\n"
            for i, t in enumerate(texts)
        ),
        encoding="utf-8",
    )
    return path


def test_vllm_scores_equal_the_hf_backend(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    from vllm_standin import install

    install(monkeypatch)
    from imprint.backends.vllm_logprobs import VLLMBackend

    vllm = VLLMBackend(str(tiny_model_dir))
    hf = HFLogprobBackend(str(tiny_model_dir), device="cpu", dtype="float32")
    assert vllm.start_ids == list(hf.start_ids)
    requests = [ScoreRequest("Kraków 北京 Москва"), ScoreRequest("the cat", prefix="Hurricane Ana")]
    for a, b in zip(vllm.score(requests), hf.score(requests), strict=True):
        np.testing.assert_array_equal(a.token_ids, b.token_ids)
        np.testing.assert_allclose(a.logp, b.logp, atol=1e-4)
        np.testing.assert_array_equal(a.rank, b.rank)
        np.testing.assert_array_equal(a.argmax, b.argmax)
    with pytest.raises(ConfigError, match="exceed the vLLM engine's context of 64"):
        vllm.score([ScoreRequest("word " * 200)])


def test_imprint_run_on_vllm_scores_token_attacks(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch
) -> None:
    from vllm_standin import install

    install(monkeypatch)
    data = _texts(tmp_path / "t.jsonl")
    base = ["run", "--data", str(data), "--bootstrap", "20", "--no-blind"]
    base += ["--cache", str(tmp_path / "c.sqlite")]
    refused = CliRunner().invoke(
        app,
        [
            *base,
            "--model",
            f"vllm:{tiny_model_dir}",
            "--attacks",
            "min_k_pp",
            "--out",
            str(tmp_path / "x"),
        ],
    )
    assert refused.exit_code != 0 and "full-vocabulary" in refused.output
    assert not (tmp_path / "x").exists()
    runs = {}
    for name, model in (("vllm", f"vllm:{tiny_model_dir}"), ("hf", str(tiny_model_dir))):
        out = tmp_path / name
        args = [*base, "--model", model, "--attacks", "loss,zlib,min_k", "--out", str(out)]
        result = CliRunner().invoke(app, [*args, *(["--dtype", "float32"] if name == "hf" else [])])
        assert result.exit_code == 0, result.output
        import pyarrow.parquet as pq

        runs[name] = pq.read_table(out / "scores.parquet").to_pydict()
    for column in ("loss", "zlib", "min_k"):
        np.testing.assert_allclose(runs["vllm"][column], runs["hf"][column], atol=1e-4)


def _live_vllm() -> bool:
    import importlib.util

    import torch

    return importlib.util.find_spec("vllm") is not None and torch.cuda.is_available()


@pytest.mark.skipif(not _live_vllm(), reason="needs vLLM and a CUDA device (neither here)")
def test_live_vllm_prompt_logprobs_equal_the_hf_backend(tiny_model_dir: Path) -> None:
    """On a machine with vLLM: the real engine's prompt log-probs against the hf backend's."""
    from imprint.backends.vllm_logprobs import VLLMBackend

    vllm = VLLMBackend(
        str(tiny_model_dir), engine_args={"dtype": "float32", "gpu_memory_utilization": 0.2}
    )
    hf = HFLogprobBackend(str(tiny_model_dir), device="cuda", dtype="float32")
    requests = [ScoreRequest("Kraków 北京 Москва"), ScoreRequest("the cat", prefix="Hurricane")]
    for a, b in zip(vllm.score(requests), hf.score(requests), strict=True):
        np.testing.assert_array_equal(a.token_ids, b.token_ids)
        np.testing.assert_allclose(a.logp, b.logp, atol=1e-3)
