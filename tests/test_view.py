"""``imprint view`` without a browser: the index read from run folders (older formats read, odd
folders noted, never a crash), each text's rank, the static site (offline: no address outside
it), and each refusal naming its flag. The browser test is tests/test_view_browser.py."""

from __future__ import annotations

import json
import re
import socket
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from imprint.cli import app
from imprint.data import Sample
from imprint.diagnostics import blind
from imprint.evaluation.evaluate import evaluate_scores
from imprint.report.writer import write_run
from imprint.run import RunConfig
from imprint.view.entries import find_entries
from imprint.view.texts import ranks

runner = CliRunner()


def _run(out: Path, shift: float = 1.0) -> Path:
    rng = np.random.default_rng(0)
    samples = [Sample(f"s{i}", f"text {i} about topic {i % 7}", i % 2) for i in range(60)]
    labels = np.array([s.label for s in samples])
    scores = {"loss": rng.normal(size=60) + shift * labels, "min_k": rng.normal(size=60)}
    config = RunConfig(model="smollm2-135m", data="d.jsonl", out=out, n_bootstrap=50)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(blind, "N_ESTIMATORS", 30)
        patch.setattr(sys, "argv", ["imprint", "run"])
        metrics = evaluate_scores(samples, scores, config=config)
        manifest = {"config": config, "data": {"evaluated": 60, "dropped": {}}}
        write_run(out, samples, scores, metrics, manifest)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runs")
    _run(root / "good")
    old = root / "old"  # a folder written before warning kinds, curves and the verdict
    old.mkdir()
    for name in ("manifest.json", "scores.parquet", ".imprint-output.json"):
        (old / name).write_bytes((root / "good" / name).read_bytes())
    metrics = json.loads((root / "good" / "metrics.json").read_text())
    for key in ("warning_kinds", "roc", "blind_verdict", "comparisons"):
        metrics.pop(key, None)
    (old / "metrics.json").write_text(json.dumps(metrics))
    broken = root / "broken"
    broken.mkdir()
    for name in ("manifest.json", "scores.parquet"):
        (broken / name).write_bytes((root / "good" / name).read_bytes())
    (broken / "metrics.json").write_text('{"attacks": {"loss": {"auc": 3}}, "warnings": []}')
    newer = root / "newer"  # written by a later imprint: refused, saying which version reads it
    newer.mkdir()
    for name in ("manifest.json", "scores.parquet"):
        (newer / name).write_bytes((root / "good" / name).read_bytes())
    metrics["format_version"] = "9.0"
    (newer / "metrics.json").write_text(json.dumps(metrics))
    (root / ".next.partial-77-00ff00ff").mkdir()
    (root / "mine").mkdir()
    (root / "mine" / "notes.txt").write_text("x")
    (root / "latest").symlink_to("good")
    return root


def test_index_reads_runs_and_notes_odd_folders(runs: Path) -> None:
    entries = {e.name: e for e in find_entries([runs])}
    assert set(entries) == {"good", "old", "broken", "newer", "next", "mine"}  # latest: alias
    good, old = entries["good"], entries["old"]
    assert (good.kind, good.n_members, good.n_nonmembers) == ("run", 30, 30)
    assert good.attacks == ["loss", "min_k"] and good.best is not None
    assert good.best[0] == "loss" and good.best[1].low < good.best[1].estimate
    assert good.blind is not None and any("blind baseline" in v for v in good.verdicts)
    assert good.page and good.note == "" and good.model == "smollm2-135m"
    # the older layout is read (its verdict re-derived from the stored suite), with no note
    assert old.note == "" and old.best == good.best and old.blind == good.blind
    assert "metrics.json cannot be read" in entries["broken"].note and not entries["broken"].page
    assert "format_version 9.0" in entries["newer"].note and "format 9.x" in entries["newer"].note
    assert "half-written" in entries["next"].note
    assert "not an imprint output" in entries["mine"].note
    # a run folder named directly is itself the entry
    assert [e.name for e in find_entries([runs / "good"])] == ["good"]


def test_ranks_put_the_highest_score_first_ties_shared_missing_unranked() -> None:
    assert ranks(np.array([0.5, 2.0, np.nan, 2.0, -1.0])) == [3, 1, None, 1, 4]
    assert ranks(np.array([np.nan])) == [None]


def test_static_site_is_offline_and_has_a_page_per_readable_run(runs: Path, tmp_path: Path):
    site = tmp_path / "site"
    res = runner.invoke(app, ["view", str(runs), "--build", str(site), "--no-serve"])
    assert res.exit_code == 0, res.output
    assert "6 folder(s)" in res.output and "site written to" in res.output
    assert (site / "run" / "good" / "report.html").is_file()
    assert not (site / "run" / "broken").exists()
    # runs of one data set are compared ahead in a static site (no server to ask)
    assert {p.name for p in (site / "compare").iterdir()} == {
        "good__vs__old.html",
        "old__vs__good.html",
    }
    page = (site / "run" / "good" / "index.html").read_text()
    table = json.loads(re.search(r'id="text-data"[^>]*>(.*?)</script>', page, re.S)[1])
    assert table["attacks"] == ["loss", "min_k"] and len(table["rows"]) == 60
    outside = re.compile(
        r"""(src|href)\s*=\s*["']?(https?:)?//|url\(\s*["']?(https?:)?//|@import"""
    )
    for path in [*site.rglob("*.html"), *site.rglob("*.js"), *site.rglob("*.css")]:
        if path.name != "report.html":  # the run's own report has its own offline test
            assert not outside.search(path.read_text()), path
    # rebuilding over an earlier site is allowed; a folder of the user's is refused
    again = runner.invoke(app, ["view", str(runs), "--build", str(site), "--no-serve"])
    assert again.exit_code == 0, again.output
    res = runner.invoke(app, ["view", str(runs), "--build", str(runs / "mine"), "--no-serve"])
    assert res.exit_code == 2 and "--build" in res.output and "did not write" in res.output


def test_refusals_name_the_flag(runs: Path, tmp_path: Path, monkeypatch) -> None:
    res = runner.invoke(app, ["view", str(runs), "--no-serve"])
    assert res.exit_code == 2 and "add --build DIR" in res.output
    res = runner.invoke(app, ["view", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "nope is not a folder" in res.output
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["view"])
    assert res.exit_code == 2 and "no runs/ here" in res.output
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = runner.invoke(app, ["view", str(runs), "--port", str(port)])
    assert res.exit_code == 2 and f"--port {port}" in res.output and "--port 0" in res.output


def test_server_builds_a_comparison_on_request_and_refuses_unknown_runs(runs: Path, tmp_path):
    import threading
    import urllib.error
    import urllib.request

    from imprint.view.server import make_server
    from imprint.view.site import build_site

    entries = find_entries([runs])
    site = tmp_path / "site"
    build_site(entries, site, served=True)
    assert not (site / "compare").exists()  # a served site builds comparisons when asked
    server = make_server(site, entries, 0)
    assert server.server_address[0] == "127.0.0.1"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/compare/"
    try:
        with urllib.request.urlopen(base + "good__vs__old.html", timeout=60) as answer:
            page = answer.read().decode()
        assert answer.status == 200 and "paired 60 samples by id" in page
        for pair in ("good__vs__nope", "good__vs__broken"):  # unknown; no readable scores
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(base + pair + ".html", timeout=60)
            assert refused.value.code == 404
    finally:
        server.shutdown()
        server.server_close()


def test_ctrl_c_while_building_says_the_runs_are_untouched(runs: Path, tmp_path, monkeypatch):
    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("imprint.view.site.build_site", interrupted)
    res = runner.invoke(app, ["view", str(runs), "--build", str(tmp_path / "s"), "--no-serve"])
    assert res.exit_code == 130 and "nothing of the runs was changed" in res.output


def test_a_spec_is_shortened_to_its_last_part_keeping_its_scheme() -> None:
    from imprint.view.site import _short

    assert _short("game:/tmp/cache/games/1a17c0c0c8ad3436") == "game:1a17c0c0c8ad3436"
    assert _short("/home/u/models/my-finetune/") == "my-finetune"
    assert _short("hf:HuggingFaceTB/SmolLM2-135M") == "hf:HuggingFaceTB/SmolLM2-135M"
    assert _short("wikimia:32") == "wikimia:32"
    assert _short("http://127.0.0.1:8000/v1/models/x") == "x"
