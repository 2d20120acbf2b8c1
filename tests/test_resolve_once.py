"""Resolve once (issue 33): a run from the command line checks its attack parameters exactly
once (``resolve``), however many stages read them; the run options are declared once."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from imprint.attacks import params as params_module
from imprint.cli import app


def _spy_everywhere(monkeypatch: pytest.MonkeyPatch, name: str, original, calls: list) -> set:
    """Replace every module's binding of ``original`` (imported by name where it is used) with
    a spy that records its first argument; the names of the modules that bound it."""

    def spy(first, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(first)
        return original(first, *args, **kwargs)

    bound = [m for m in list(sys.modules.values()) if getattr(m, name, None) is original]
    for module in bound:
        monkeypatch.setattr(module, name, spy)
    return {m.__name__ for m in bound}


def _run_tiny(tiny_model_dir: Path, tmp_path: Path, *extra: str) -> None:
    """``imprint run`` of loss and min_k with the tiny model on 12 short texts."""
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(f'{{"text": "text number {i} is here", "label": {i % 2}}}\n' for i in range(12)),
        encoding="utf-8",
    )
    result = CliRunner().invoke(
        app,
        ["run", "--model", str(tiny_model_dir), "--data", str(data), "--attacks", "loss,min_k",
         *extra, "--bootstrap", "20", "--no-blind", "--device", "cpu",
         "--out", str(tmp_path / "run"), "--cache", str(tmp_path / "c.sqlite")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output


def test_one_check_params_per_cli_run(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import imprint.attacks.base
    import imprint.run.plan
    import imprint.run.score  # noqa: F401  (imported now, so the spy replaces their binding)

    calls: list[dict] = []
    bound = _spy_everywhere(monkeypatch, "check_params", params_module.check_params, calls)
    assert {"imprint.run.plan", "imprint.attacks.base"} <= bound
    _run_tiny(tiny_model_dir, tmp_path, "--param", "min_k.k=0.2")
    assert calls == [{"min_k": {"k": "0.2"}}]  # once, on the text the command line gave
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["config"]["params"] == {"min_k": {"k": 0.2}}  # recorded typed, as before


def test_every_declared_run_option_reaches_the_run() -> None:
    """A flag declared in RunOptions but read nowhere would be dropped without a word: each is
    read by run_config_kwargs (by name, or through the shared/API flag tables) or by the
    command itself before the config is built (--config, --limit)."""
    import inspect
    import re

    from imprint.cli import run as run_module
    from imprint.cli.flags import API_FLAGS, SHARED_FLAGS
    from imprint.cli.options import RunOptions

    read = set(re.findall(r"\bo\.(\w+)", inspect.getsource(run_module.run_config_kwargs)))
    by_command = {"config", "limit"}
    declared = {f.name for f in dataclasses.fields(RunOptions)}
    assert declared - read - set(SHARED_FLAGS) - set(API_FLAGS) - by_command == set()


def test_the_shared_model_options_are_declared_once() -> None:
    """The four options every local model takes come from one dataclass: the CLI's flags, the
    run's shared_args check, the providers' mapping and option classes, and the experiment
    file's settings."""
    from imprint.backends.providers import HF, VLLM
    from imprint.backends.shared_options import SHARED_NAMES, SharedModelOptions
    from imprint.cli.flags import SHARED_FLAGS
    from imprint.cli.options import RunOptions
    from imprint.run.plan import SHARED_ARGS
    from imprint.study.spec import Settings

    assert SHARED_NAMES == ("device", "dtype", "max_length", "start_token")
    assert tuple(SHARED_FLAGS) == SHARED_ARGS == SHARED_NAMES
    assert set(HF.settings.values()) == set(SHARED_NAMES)
    assert set(VLLM.settings.values()) <= set(SHARED_NAMES)
    # a provider's option class takes the shared fields from SharedModelOptions (default and help)
    # instead of restating them: HF takes all four, vLLM dtype and start_token
    shared = {f.name: f for f in dataclasses.fields(SharedModelOptions)}
    assert issubclass(HF.options, SharedModelOptions)
    for options in (HF.options, VLLM.options):
        for f in dataclasses.fields(options):
            if f.name in shared:
                assert (f.default, dict(f.metadata)) == (
                    shared[f.name].default,
                    dict(shared[f.name].metadata),
                ), f"{options.__name__}.{f.name} restates the shared option"
    for derived in (RunOptions, Settings):
        assert issubclass(derived, SharedModelOptions)
    assert Settings(dtype="float32").shared_args() == {"dtype": "float32"}
    defaults = {f.name: f.default for f in dataclasses.fields(SharedModelOptions)}
    assert defaults == SHARED_FLAGS
    src = Path(__file__).resolve().parents[1] / "src" / "imprint"
    for path in ("cli/flags.py", "run/plan.py", "backends/providers.py", "study/spec.py"):
        text = (src / path).read_text(encoding="utf-8")
        assert '"start_token"' not in text and '"device"' not in text, path


def test_one_build_attacks_per_cli_run(
    tiny_model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's attacks are built when it is resolved and carried by the plan; scoring reads
    them (it built them a second time before)."""
    import imprint.attacks
    import imprint.attacks.base
    import imprint.run.plan
    import imprint.run.score  # noqa: F401  (imported now, so the spy replaces their binding)

    calls: list[tuple[str, ...]] = []
    bound = _spy_everywhere(monkeypatch, "build_attacks", imprint.attacks.base.build_attacks, calls)
    assert "imprint.run.plan" in bound
    _run_tiny(tiny_model_dir, tmp_path)
    assert [tuple(names) for names in calls] == [("loss", "min_k")]


def test_all_is_read_again_in_the_run_without_building_again() -> None:
    """'all' built before the data loaded chooses, once the run holds texts out, what a build
    with that fuller context chooses (the held-out attacks join), in the same order."""
    from imprint.attacks import RunContext, build_attacks
    from imprint.attacks.shots import HELDOUT_KEY
    from imprint.data.sample import Sample

    held = tuple(Sample(f"p{i}", f"text {i}", 0) for i in range(40))
    later = RunContext(refs=("r",), pools={HELDOUT_KEY: held})
    for names in (["all"], ["all", "qmia"], ["min_k", "all"]):
        early = build_attacks(names, RunContext(refs=("r",)))
        assert "camia" not in [a.name for a in early]  # fits on held-out texts: none yet
        in_run = [a.name for a in early.in_run(later)]
        assert in_run == [a.name for a in build_attacks(names, later)]
        assert {"camia", "qmia"} <= set(in_run)
