"""Differences from the paper or the authors' code: printed by ``imprint attacks``, recorded in the
manifest and listed in the docs' attack reference, for every attack that declares one."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from imprint.attacks import available_attacks
from imprint.attacks.loss import Loss
from imprint.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"


def test_imprint_attacks_prints_every_declared_deviation(monkeypatch):
    monkeypatch.setattr(Loss, "deviations", ("scores the first token after the start token",))
    out = CliRunner().invoke(app, ["attacks"]).output
    for name, cls in available_attacks().items():
        for deviation in cls.deviations:
            assert f"differs: {deviation}" in out, name
    lines = out.splitlines()
    loss_line = next(i for i, line in enumerate(lines) if line.startswith("loss "))
    assert "differs: scores the first token" in lines[loss_line + 1]


def test_every_declared_deviation_is_in_the_attack_reference_docs():
    """The docs' attack reference (docs/reference/attacks.md) is written from the registry by
    the MkDocs hook; every deviation an attack declares must appear under its name."""
    import importlib.util

    hook = README.parent / "docs" / "hooks" / "imprint_docs.py"
    spec = importlib.util.spec_from_file_location("imprint_docs", hook)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = module.attacks_markdown()
    for name, cls in available_attacks().items():
        entry = page.split(f"### {name} {{ #{name} }}", 1)[1].split("\n### ", 1)[0]
        for deviation in cls.deviations:
            assert module._inline(deviation) in entry, (
                f"{name}: {deviation!r} not in its docs entry"
            )


def test_the_manifest_records_the_deviations_of_the_attacks_run(
    tiny_model_dir, tmp_path, monkeypatch
):
    from imprint.run import RunConfig, execute_run

    monkeypatch.setattr(Loss, "deviations", ("one stated difference",))
    wikimia = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikimia"
    result = execute_run(
        RunConfig(
            model=str(tiny_model_dir),
            data=str(wikimia / "WikiMIA_length32.jsonl"),
            n_per_label=4,
            n_bootstrap=10,
            attacks=("loss", "zlib"),
            progress=False,
            blind=False,
            cache=tmp_path / "cache.sqlite",
            out=tmp_path / "run",
        )
    )
    assert result.manifest["attack_deviations"] == {"loss": ["one stated difference"]}
