"""The HTML report in a real headless browser: it loads offline and its plots render."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from imprint.data import Sample
from imprint.evaluation.evaluate import evaluate_scores
from imprint.report.writer import write_run
from imprint.run import RunConfig

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# appended to a copy of the page: reports how many images decoded to a real size
PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images];
  const ok = imgs.filter(i => i.complete && i.naturalWidth > 100 && i.naturalHeight > 100);
  const d = document.createElement('div');
  d.id = 'probe'; d.textContent = `images-ok:${ok.length}/${imgs.length}`;
  document.body.appendChild(d);
});
</script>"""


@pytest.fixture()
def report_dir(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    samples = [Sample(f"s{i}", f"text number {i} about topic {i % 7}", i % 2) for i in range(80)]
    labels = np.array([s.label for s in samples])
    scores = {"loss": rng.normal(size=80) + labels, "min_k": rng.normal(size=80)}
    config = RunConfig(model="m", data="d", out=tmp_path, n_bootstrap=50)
    metrics = evaluate_scores(samples, scores, config=config)
    manifest = {"config": config, "data": {"evaluated": 80, "dropped": {}}}
    write_run(tmp_path, samples, scores, metrics, manifest)
    return tmp_path


def test_report_renders_in_headless_chromium(report_dir: Path, tmp_path: Path) -> None:
    assert CHROMIUM, (
        "chromium is required for this test: scripts/setup (or scripts/install-browser) installs it"
    )
    page = report_dir / "probe.html"
    page.write_text((report_dir / "report.html").read_text().replace("</body>", PROBE + "</body>"))
    profile = tmp_path / "profile"
    dom = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--virtual-time-budget=5000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert "images-ok:3/3" in dom, dom[-500:]
    shot = tmp_path / "shot.png"
    subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--window-size=1200,6000",
            f"--screenshot={shot}",
            (report_dir / "report.html").as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    import matplotlib.image as mpimg

    pixels = mpimg.imread(shot)[..., :3]
    # plots draw coloured curves and bars: a page of text and tables alone is grey-scale
    colourful = (pixels.max(-1) - pixels.min(-1)) > 0.25
    assert colourful.mean() > 0.002, f"no rendered plot colours ({colourful.mean():.5f})"
