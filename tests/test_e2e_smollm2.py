"""End to end with the real pretrained SmolLM2-135M on a WikiMIA-32 subset."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from imprint.run import RunConfig, execute_run

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _shared_model_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reuse the converted GGUF across runs (the conversion itself is tested by loading it)."""
    monkeypatch.setenv("IMPRINT_CACHE_DIR", str(Path.home() / ".cache" / "imprint"))


def test_smollm2_wikimia32_run_folder(tmp_path):
    out = tmp_path / "run"
    result = execute_run(
        RunConfig(
            model="smollm2-135m",
            data="wikimia:32",
            out=out,
            attacks=("loss", "zlib", "lowercase", "min_k", "min_k_pp"),
            n_per_label=40,
            seed=1,
            cache=tmp_path / "signals.sqlite",
            progress=False,
        )
    )
    metrics = json.loads((out / "metrics.json").read_text())
    table = pq.read_table(out / "scores.parquet").to_pydict()
    assert len(table["id"]) == 80
    for name in ("loss", "zlib", "zlib_char", "lowercase", "min_k", "min_k_pp"):
        values = np.array(table[name])
        assert np.isfinite(values).all(), name
        row = metrics["attacks"][name]
        assert 0.0 <= row["auc"]["low"] <= row["auc"]["estimate"] <= row["auc"]["high"] <= 1.0
    # a real LM assigns real text a plausible per-token log-likelihood
    assert -8.0 < float(np.mean(table["loss"])) < -1.0
    # Min-K% at k=1 would equal LOSS; at k=0.2 it is strictly lower
    assert (np.array(table["min_k"]) < np.array(table["loss"])).all()
    # WikiMIA's members and non-members differ in time: the blind baseline must flag it
    assert metrics["blind"]["auc"]["estimate"] > 0.75
    assert "blind_not_at_chance" in metrics["warning_kinds"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["models"]["target"]["spec"] == "smollm2-135m"
    assert manifest["requests"]["target"]["logprobs"]["executed"] == 160  # x and lower(x)
    assert result.manifest["data"]["evaluated"] == 80
