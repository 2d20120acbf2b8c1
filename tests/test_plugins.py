"""Third-party plugins: an installed distribution adds an attack, a backend and a benchmark
through entry points (``imprint.attacks``, ``imprint.backends``, ``imprint.benchmarks``).

The fixture is real packaging, not a mock: a package and its ``.dist-info`` (METADATA and
entry_points.txt, as pip writes them) in a folder on ``sys.path``, found by importlib.metadata in
a fresh ``imprint`` process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from attack_listing import attack_entries
from conftest import WIKIMIA

ATTACK = '''
"""A third-party attack: the negated spread of token log-likelihoods (higher = member)."""
from dataclasses import dataclass

import numpy as np

from imprint.attacks.api import Attack, Need, SignalSet


@dataclass(frozen=True)
class LogpSpread(Attack):
    summary = "minus the standard deviation of token log p (a plugin's attack)"
    paper = "imprint's plugin test"

    def needs(self) -> tuple[Need, ...]:
        return (Need(),)

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        return {self.name: np.array([-float(np.std(s.logp)) for s in signals.get()])}
'''
BACKEND = '''
"""A third-party backend: ``toyhf:FOLDER`` serves a transformers folder (through imprint's hf
loader, to keep the test small)."""
from imprint.backends.base import LOGPROBS
from imprint.backends.options import HFOptions
from imprint.backends.providers import load_hf
from imprint.backends.registry import make_provider

PROVIDER = make_provider(
    "toyhf",
    load_hf,
    options=HFOptions,
    capabilities=frozenset({LOGPROBS}),
    summary="a plugin's provider: a transformers folder",
    example="toyhf:/path/to/folder",
    settings={"device": "device"},
)
'''
BENCHMARK = '''
"""A third-party benchmark family, ``toybench``: one JSON-lines file in a data dir."""
from imprint.data.catalog import BenchmarkEntry, DataFile


def benchmarks():
    return [
        BenchmarkEntry(
            name="toybench:16",
            family="toybench",
            description="sixteen WikiMIA texts, as a plugin's benchmark",
            provenance="imprint's plugin test",
            licence="MIT",
            size="16 texts",
            fields="input, label",
            caveats=("a test fixture",),
            files=(DataFile(local="toybench/toy16.jsonl"),),
            text_field="input",
            label_field="label",
        )
    ]
'''
ENTRY_POINTS = """\
[imprint.attacks]
logp_spread = imprint_toy.attacks:LogpSpread

[imprint.backends]
toyhf = imprint_toy.backends:PROVIDER

[imprint.benchmarks]
toybench = imprint_toy.data:benchmarks
"""


def _dist_info(site: Path, dist: str, entry_points: str) -> None:
    info = site / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    (info / "RECORD").write_text("")


@pytest.fixture
def plugin_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose sys.path holds the installed plugin ``imprint-toy`` (and a broken
    one, ``imprint-broken``, whose attack's module does not exist), with its benchmark's file."""
    site = tmp_path / "site"
    package = site / "imprint_toy"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name, code in (("attacks", ATTACK), ("backends", BACKEND), ("data", BENCHMARK)):
        (package / f"{name}.py").write_text(textwrap.dedent(code))
    _dist_info(site, "imprint-toy", ENTRY_POINTS)
    _dist_info(site, "imprint-broken", "[imprint.attacks]\nghost = imprint_ghost:Ghost\n")
    data = tmp_path / "data"
    (data / "toybench").mkdir(parents=True)
    rows = [json.loads(line) for line in (WIKIMIA / "WikiMIA_length32.jsonl").open()][:16]
    (data / "toybench" / "toy16.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {
        **os.environ,
        "PYTHONPATH": path,
        "IMPRINT_DATA_DIR": str(data),
        "IMPRINT_CACHE_DIR": str(tmp_path / "cache"),
    }


def _imprint(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "imprint", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_plugin_attack_is_listed_with_its_package_and_a_broken_one_is_reported(plugin_env):
    listed = _imprint(plugin_env, "attacks")
    assert listed.returncode == 0, listed.stderr
    entries = attack_entries(listed.stdout)  # wrapped at 80 columns: an entry, not a line
    spread = entries["logp_spread"]
    assert "minus the standard deviation" in spread and spread.endswith("(plugin imprint-toy)")
    assert "loss" in entries and "(plugin" not in entries["loss"]
    ghost = entries["ghost"]
    assert "broken" in ghost and "imprint-broken" in ghost and "imprint_ghost" in ghost
    assert "PluginWarning" in listed.stderr and "ModuleNotFoundError" in listed.stderr


def test_a_plugin_backend_and_benchmark_are_listed(plugin_env):
    backends = _imprint({**plugin_env, "COLUMNS": "400"}, "backends")  # an entry a line
    assert backends.returncode == 0, backends.stderr
    (toy,) = [line for line in backends.stdout.splitlines() if line.startswith("toyhf:")]
    assert "logprobs" in toy and toy.endswith("(plugin imprint-toy)")
    assert any(
        line.startswith("smollm2-135m") and "alias" in line for line in backends.stdout.splitlines()
    )
    datasets = _imprint(plugin_env, "datasets", "--json", "toybench")
    assert datasets.returncode == 0, datasets.stderr
    (entry,) = json.loads(datasets.stdout)
    assert entry["name"] == "toybench:16" and entry["origin"] == "plugin imprint-toy"
    assert entry["local_copy"].endswith("toybench/toy16.jsonl")
    table = _imprint(plugin_env, "datasets", "toybench")
    assert table.returncode == 0 and "toybench" in table.stdout and "imprint-toy" in table.stdout


def test_a_plugin_attack_runs_on_a_plugin_backend_and_a_plugin_benchmark(
    plugin_env, tiny_model_dir, tmp_path
):
    out = tmp_path / "run"
    ran = _imprint(
        plugin_env,
        "run",
        *("--model", f"toyhf:{tiny_model_dir}", "--data", "toybench:16"),
        *("--attacks", "loss,logp_spread", "--device", "cpu", "--no-blind"),
        *("--bootstrap", "20", "--out", str(out), "--cache", str(tmp_path / "s.sqlite")),
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    import pandas as pd

    scores = pd.read_parquet(out / "scores.parquet")
    assert len(scores) == 16 and scores["logp_spread"].notna().all()
    assert (scores["logp_spread"] <= 0).all() and scores["logp_spread"].nunique() > 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["requests"]["target"]["logprobs"]["executed"] == 16  # one pass, both attacks
    metrics = json.loads((out / "metrics.json").read_text())
    assert 0 <= metrics["attacks"]["logp_spread"]["auc"]["estimate"] <= 1


OLD_RECIPE = '''
"""An attack from the previous release's one-file recipe: it overrides score(self, signals)."""
from dataclasses import dataclass

import numpy as np

from imprint.attacks.base import Attack
from imprint.signals.needs import Need, SignalSet


@dataclass(frozen=True)
class OldSpread(Attack):
    summary = "minus the spread of token log p, written for the previous release"
    paper = "imprint's plugin test"

    def needs(self) -> tuple[Need, ...]:
        return (Need(),)

    def score(self, signals: SignalSet) -> dict[str, np.ndarray]:
        return {self.name: np.array([-float(np.std(s.logp)) for s in signals.get()])}
'''


def test_an_attack_overriding_the_old_score_hook_is_refused_at_registration_saying_what_to_rename():
    """The previous release's recipe overrode ``score(self, signals)``; ``score`` now receives
    ScoringInputs, so such a class crashed inside the run (AttributeError: 'ScoringInputs'
    object has no attribute 'get'). It is refused when it is registered, in one line."""
    from imprint.attacks.base import register
    from imprint.errors import ConfigError

    # as the one-file recipe placed it: a module in imprint.attacks
    namespace: dict[str, object] = {"__name__": "imprint.attacks.old_spread"}
    exec(textwrap.dedent(OLD_RECIPE), namespace)  # noqa: S102 - the plugin's file, verbatim
    with pytest.raises(ConfigError) as refused:
        register("old_spread_test")(namespace["OldSpread"])
    message = str(refused.value)
    assert "\n" not in message and "old_spread_test" in message
    assert "score_signals(self, signals)" in message and "rename" in message


def test_a_plugin_attack_from_the_old_recipe_is_refused_before_any_work(
    plugin_env, tiny_model_dir, tmp_path
):
    package = Path(plugin_env["PYTHONPATH"].split(os.pathsep)[0]) / "imprint_toy"
    (package / "old.py").write_text(textwrap.dedent(OLD_RECIPE))
    (package.parent / "imprint_toy-0.1.dist-info" / "entry_points.txt").write_text(
        ENTRY_POINTS.replace(
            "[imprint.backends]", "old_spread = imprint_toy.old:OldSpread\n\n[imprint.backends]"
        )
    )
    ran = _imprint(
        plugin_env,
        "run",
        *("--model", f"toyhf:{tiny_model_dir}", "--data", "toybench:16", "--device", "cpu"),
        *("--attacks", "loss,old_spread", "--no-blind", "--out", str(tmp_path / "run")),
        *("--cache", str(tmp_path / "s.sqlite")),
    )
    assert ran.returncode != 0
    output = ran.stderr + ran.stdout  # the run prints its one-line error on stdout
    error = [line for line in output.splitlines() if "old_spread" in line]
    assert len(error) == 1 and "rename" in error[0] and "score_signals" in error[0], output
    assert "Traceback" not in output and not (tmp_path / "run" / "scores.parquet").exists()


@pytest.mark.parametrize("version", [1, 2])
def test_a_plugin_written_for_each_documented_api_version_registers_or_is_told_what_to_rename(
    version,
):
    """Version 2 (imprint.attacks.api, the fixture's plugin) registers as it is; version 1 (the
    previous release's recipe) is refused in one line that says what VERSIONS says to change.
    Both run as installed plugins in the tests above; a new version must add its recipe here."""
    from imprint.attacks.api import API_VERSION, VERSIONS
    from imprint.attacks.registry import _check_attack
    from imprint.errors import ConfigError

    assert sorted(VERSIONS) == [1, 2] and API_VERSION == 2
    namespace: dict[str, object] = {"__name__": f"imprint_toy.v{version}"}
    exec(textwrap.dedent({1: OLD_RECIPE, 2: ATTACK}[version]), namespace)  # noqa: S102
    cls = namespace["OldSpread" if version == 1 else "LogpSpread"]
    if version == API_VERSION:
        assert _check_attack(f"plugin_v{version}", cls).name == f"plugin_v{version}"
        return
    with pytest.raises(ConfigError) as refused:
        _check_attack(f"plugin_v{version}", cls)
    assert "\n" not in str(refused.value) and "score_signals(self, signals)" in str(refused.value)
    assert "score_signals(self, signals)" in VERSIONS[version]
