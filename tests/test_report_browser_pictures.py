"""The run report and the study page in a real headless Chromium: the plots decode and the
elements a reader needs exist (ROC and forest figures with their alt texts, the Attacks table,
the most exposed texts, the provenance block; the study's colour bar and blind warning)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_study_heatmap import _result

from imprint.backends.models import describe_model
from imprint.data import Sample
from imprint.diagnostics import blind
from imprint.evaluation.evaluate import evaluate_scores
from imprint.report.writer import write_run
from imprint.run import RunConfig
from imprint.study.table_render import to_html
from imprint.study.tables import build_tables

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", "--disable-component-update"]  # fmt: skip

# appended to a copy of the page: lists what rendered, as the browser sees it
PROBE = """<script>
window.addEventListener('load', () => {
  const q = s => document.querySelector(s);
  const ok = i => i && i.complete && i.naturalWidth > 100 && i.naturalHeight > 100;
  const facts = {
    roc: ok(q('#plot-roc img')) && q('#plot-roc img').alt.includes('ROC'),
    forest: ok(q('#plot-forest img')) && q('#plot-forest img').alt.includes('forest'),
    attacks: !!q('table#attacks') && q('table#attacks tbody').rows.length,
    exposed: document.querySelectorAll('table[id^="exposed-"]').length,
    provenance: q('table#provenance') ? q('table#provenance').innerText : '',
    colourbar: !!q('#colour-bar .bar') && q('#colour-bar .bar').offsetWidth > 100,
    blindwarn: document.querySelectorAll('.blind-warning').length,
  };
  const d = document.createElement('pre');
  d.id = 'probe'; d.textContent = 'PRO' + 'BE:' + JSON.stringify(facts) + ':EN' + 'D';
  document.body.appendChild(d);
});
</script>"""


def _facts(page: Path, profile: Path) -> dict:
    import json

    probe = page.with_name("probe-" + page.name)
    probe.write_text(page.read_text().replace("</body>", PROBE + "</body>"), encoding="utf-8")
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=5000",
         "--dump-dom", probe.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    found = dom.split("PROBE:", 1)[1].split(":END", 1)[0]
    return json.loads(found.replace("&quot;", '"'))


@pytest.fixture(scope="module")
def run_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(0)
    samples = [Sample(f"s{i}", f"text number {i} about topic {i % 7}", i % 2) for i in range(60)]
    labels = np.array([s.label for s in samples])
    scores = {"loss": rng.normal(size=60) + labels, "min_k": rng.normal(size=60)}
    out = tmp_path_factory.mktemp("run") / "run"
    config = RunConfig(model="smollm2-135m", data="d", out=out, n_bootstrap=50)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blind, "N_ESTIMATORS", 30)  # the SoK forest, smaller for speed
        patch.setattr(sys, "argv", ["imprint", "run", "--model", "smollm2-135m", "--data", "d"])
        metrics = evaluate_scores(samples, scores, config=config)
        entry = {"model": "smollm2-135m", "provider": "hf", "fingerprint": "99da73f1",
                 "resolved_model": describe_model("smollm2-135m")}  # fmt: skip
        manifest = {"config": config, "data": {"evaluated": 60, "dropped": {}},
                    "models": {"target": entry}}  # fmt: skip
        write_run(out, samples, scores, metrics, manifest)
    return out / "report.html"


def test_run_report_renders_its_plots_tables_and_provenance(run_page: Path, tmp_path: Path):
    assert CHROMIUM, "chromium is required: scripts/install-browser installs it"
    facts = _facts(run_page, tmp_path / "profile")
    assert facts["roc"] and facts["forest"], facts
    assert facts["attacks"] >= 2 and facts["exposed"] == 2
    for shown in ("imprint version", "imprint run --model smollm2-135m --data d",
                  "SmolLM2-135M-Instruct (instruct)", "GGUF Q4_1", "99da73f1"):  # fmt: skip
        assert shown in facts["provenance"], shown


def test_study_page_renders_its_colour_bar_and_blind_warning(tmp_path: Path):
    assert CHROMIUM, "chromium is required: scripts/install-browser installs it"
    page = tmp_path / "tables.html"
    page.write_text(to_html(build_tables(_result(tmp_path, 0.966)), title="t"), encoding="utf-8")
    facts = _facts(page, tmp_path / "profile")
    assert facts["colourbar"] and facts["blindwarn"] == 1, facts
