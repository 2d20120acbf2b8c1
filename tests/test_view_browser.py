"""``imprint view`` over a real runs/ folder (a run on each of two models, a document run, a game,
an audit, a study, odd folders), served by the command itself and driven in headless Chromium:
the index lists every folder with its figures and notes, a click on a heading sorts it, the
filter and the kind menu narrow it, two ticked runs open their paired comparison (built on
request), a run page's text table searches and sorts; Ctrl-C stops the server with exit 0.

Screenshots go to the test's folder; with IMPRINT_DOCS_PICTURES=1 also to docs/img (the
pictures docs/view.md shows)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from view_fixtures import KINDS, build_runs

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--hide-scrollbars",
         "--disable-background-networking", "--disable-component-update"]  # fmt: skip
DOCS_IMG = Path(__file__).resolve().parents[1] / "docs" / "img"

# served beside the site (same origin): drives the pages in a full-window frame by real DOM
# events (clicks, typing) and writes what it saw; ?shot=NAME stops at that picture's view
PROBE = Path(__file__).parent / "data" / "view_probe.html"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, tiny_model_dir: Path, tiny_ref_dir: Path):
    return build_runs(tmp_path_factory.mktemp("view"), tiny_model_dir, tiny_ref_dir)


def _chromium(url: str, profile: Path, *extra: str) -> str:
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=20000",
         "--window-size=1600,900", *extra, url],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    width, height = struct.unpack(">II", head[16:24])
    return width, height


def test_view_serves_sorts_filters_and_compares_in_chromium(runs: Path, tmp_path: Path) -> None:
    assert CHROMIUM, "chromium is required: scripts/install-browser installs it"
    site = tmp_path / "site"
    server = subprocess.Popen(
        [sys.executable, "-m", "imprint", "view", str(runs), "--build", str(site), "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "COLUMNS": "200"},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal has it
    )  # fmt: skip
    try:
        line = server.stdout.readline() if server.stdout else ""
        assert "imprint view: 11 folder(s)" in line and "http://127.0.0.1:" in line, line + (
            server.stderr.read() if server.poll() is not None and server.stderr else ""
        )
        address = line.split("http://", 1)[1].split()[0].rstrip("/")
        shutil.copyfile(PROBE, site / "probe.html")
        dom = _chromium(f"http://{address}/probe.html", tmp_path / "profile", "--dump-dom")
        facts = json.loads(html.unescape(dom.split("PROBE:", 1)[1].split(":END", 1)[0]))
        assert "error" not in facts, facts
        shots = {}
        for name in ("index", "compare", "run"):
            shots[name] = tmp_path / f"view-{name}.png"
            _chromium(f"http://{address}/probe.html?shot={name}", tmp_path / f"p-{name}",
                      f"--screenshot={shots[name]}")  # fmt: skip
    finally:
        server.send_signal(signal.SIGINT)
        out, err = server.communicate(timeout=30)
    assert server.returncode == 0, err
    assert out.strip().splitlines()[-1] == "imprint view: stopped", out

    # the index: every folder, audit and study runs under their parent, odd folders with notes
    rows = {r["name"]: r for r in facts["rows"]}
    assert {n: rows[n]["kind"] for n in KINDS} == KINDS
    assert rows["audit/run"]["kind"] == "run" and "in audit" in rows["audit/run"]["text"]
    assert sum(n.startswith("study/runs/") for n in rows) == 1
    assert rows["r-cut"]["note"] and "metrics.json cannot be read" in rows["r-cut"]["text"]
    assert rows["r-new"]["note"] and "half-written" in rows["r-new"]["text"]
    assert "not an imprint output" in rows["notes"]["text"]
    assert not any(rows[n]["note"] for n in ("r-tiny", "r-ref", "docs", "game", "audit"))
    tiny = rows["r-tiny"]["text"]
    assert "24 / 14" in tiny and "loss, zlib, zlib_char, min_k" in tiny and "blind baseline" in tiny
    interval = r"^\w+\n0\.\d{3} \[0\.\d{3}, [01]\.\d{3}\]$"  # NAME AUC [low, high]
    assert re.match(interval, rows["r-tiny"]["cells"][8]), rows["r-tiny"]["cells"]  # best attack
    assert re.match(interval, rows["r-tiny"]["cells"][9])  # the strongest blind classifier
    assert rows["r-ref"]["cells"][9] == "-"  # run with --no-blind
    assert "dataset inference" in rows["docs"]["text"]
    assert "epsilon >=" in rows["audit"]["text"] and "privacy game" in rows["game"]["text"]
    # sort: descending on the best AUC; filter and kind menu narrow the rows
    assert facts["sortState"] == "descending"
    assert facts["sortedBest"] == sorted(facts["sortedBest"], reverse=True)
    assert facts["sortedNames"][0] in ("r-tiny", "r-ref", "docs", "audit/run", "study")
    assert set(facts["filtered"]) == {
        "r-tiny",
        "r-ref",
        "study",
        *[n for n in rows if n.startswith("study/runs/")],
    }
    assert facts["shown"].startswith(f"{len(facts['filtered'])} of {len(rows)}")
    assert set(facts["kindFiltered"]) == {n for n, r in rows.items() if r["kind"] == "run"}
    # two ticked runs: their paired comparison, computed by the server on request
    assert facts["compareEnabled"] and facts["compareUrl"] == "/compare/r-tiny__vs__r-ref.html"
    assert facts["compareTitle"] == "r-tiny (A) vs r-ref (B)"
    assert facts["compareAttacks"] == ["loss", "zlib", "zlib_char", "min_k"]
    assert "paired 38 samples by id" in facts["compareText"]
    # the run page: its report, every text with each attack's score and rank
    assert facts["report"] == 1
    assert facts["textRows"] == 38
    assert (
        facts["textHeads"][:3] == ["id", "label", "text"] and "min_k (rank)" in facts["textHeads"]
    )
    assert facts["firstRank"].endswith("(1)")
    assert facts["searched"] and all("storm" in t for t in facts["searched"])
    assert facts["searchCount"].startswith(f"{len(facts['searched'])} of 38")
    assert facts["cutPage"] == 404  # no page for a run whose metrics cannot be read
    for name, path in shots.items():
        assert _png_size(path) == (1600, 900) and path.stat().st_size > 30_000, name
        if os.environ.get("IMPRINT_DOCS_PICTURES") == "1":
            shutil.copyfile(path, DOCS_IMG / path.name)
