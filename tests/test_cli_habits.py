"""The command-line habits of lm-eval users (issue 35), each with the message a user reads:
``--model hf --model-args pretrained=ID``, bare hub ids, ``--limit``, ``--config run.yaml``,
``--version``, errors naming the flag typed, did-you-mean for aliases and benchmarks, and hub
access that fails in seconds when offline. No model is loaded: each command stops at the error
(or the line) it is about."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from imprint.backends.models import resolve_model
from imprint.cli import app
from imprint.data import hub_access

runner = CliRunner()


def _data(tmp_path: Path, members: int = 3, nonmembers: int = 3) -> Path:
    rows = [{"text": f"member text number {i} of the set", "label": 1} for i in range(members)]
    rows += [{"text": f"other text number {i} of the set", "label": 0} for i in range(nonmembers)]
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _run(tmp_path: Path, *args: object, env: dict[str, str] | None = None) -> tuple[int, str]:
    argv = ["run", *map(str, args)]
    if "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]
    result = runner.invoke(app, argv, env=env)
    return result.exit_code, " ".join(result.output.split())


def test_lm_eval_model_spelling_is_read_as_a_hub_id_and_said(tmp_path: Path) -> None:
    code, out = _run(
        tmp_path, "--model", "hf", "--model-args", "pretrained=HuggingFaceTB/SmolLM2-135M,"
        "dtype=float32", "--data", tmp_path / "absent.jsonl",
    )  # fmt: skip
    assert "--model hf --model-args pretrained=HuggingFaceTB/SmolLM2-135M is read as " \
        "--model hf:HuggingFaceTB/SmolLM2-135M" in out  # fmt: skip
    assert code == 2 and "absent.jsonl" in out  # the run went on to the data, with dtype kept


def test_lm_eval_model_without_pretrained_names_the_imprint_spelling(tmp_path: Path) -> None:
    code, out = _run(tmp_path, "--model", "hf", "--data", _data(tmp_path))
    assert code == 2
    assert "error: --model hf names no model: write --model hf:ID" in out
    assert "--model hf --model-args pretrained=ID" in out


def test_a_bare_hub_id_is_a_hub_id_and_a_near_alias_is_a_typo(tmp_path: Path) -> None:
    assert resolve_model("gpt2").location == "gpt2"
    assert not resolve_model("gpt2").is_local
    code, out = _run(tmp_path, "--model", "smollm2-135", "--data", _data(tmp_path))
    assert code == 2
    assert "unknown model alias 'smollm2-135': did you mean 'smollm2-135m'?" in out
    assert "hf:smollm2-135" in out  # how to say it is a hub model after all


def test_a_benchmark_typo_gets_did_you_mean(tmp_path: Path) -> None:
    code, out = _run(tmp_path, "--model", "smollm2-135m", "--data", "wikimi:32")
    assert code == 2 and "Did you mean wikimia:32" in out


def test_limit_is_n_per_label_halved_and_errors_name_the_flags(tmp_path: Path) -> None:
    data = _data(tmp_path)
    code, out = _run(tmp_path, "--model", "smollm2-135m", "--data", data, "--limit", "7")
    assert code == 2 and "--limit 7: give an even number" in out
    assert "(the same as --n-per-label N/2)" in out
    code, out = _run(tmp_path, "--model", "smollm2-135m", "--data", data, "--limit", "10",
                     "--n-per-label", "3")  # fmt: skip
    assert code == 2 and "--limit 10 means --n-per-label 5, but --n-per-label 3" in out
    # --limit 10 asks for 5 per label of 3: the data layer's error names the flag, not Python's
    code, out = _run(tmp_path, "--model", "smollm2-135m", "--data", data, "--limit", "10")
    assert code == 2 and "asked for 5 members per label but only 3" in out
    assert "Fix: use --n-per-label <= 3" in out and "n_per_label" not in out


def test_a_data_error_names_label_field_as_the_flag(tmp_path: Path) -> None:
    code, out = _run(
        tmp_path, "--model", "smollm2-135m", "--data", _data(tmp_path), "--label-field", "lab"
    )
    assert code == 2 and "no label field 'lab'" in out
    assert "pass --label-field=<name>" in out and "label_field" not in out


def test_config_file_gives_every_flag_and_the_command_line_wins(tmp_path: Path) -> None:
    data = _data(tmp_path)
    config = tmp_path / "run.yaml"
    config.write_text(
        f"model: smollm2-135m\ndata: {data}\nattacks: [loss, zlib]\nn_per_label: 40\n"
        "model-args: {dtype: float32}\nno-blind: true\n",
        encoding="utf-8",
    )
    code, out = _run(tmp_path, "--config", config)
    assert code == 2 and "asked for 40 members per label" in out  # model, data, n from the file
    code, out = _run(tmp_path, "--config", config, "--n-per-label", "30")
    assert code == 2 and "asked for 30 members per label" in out  # the command line wins


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model: smollm2-135m\nn-per-labl: 3\n",
         "unknown key 'n-per-labl'; did you mean 'n-per-label'?"),
        ("model: smollm2-135m\nn-per-label: '3'\n",
         "n-per-label: expected a whole number, got '3'"),
        ("model: smollm2-135m\nmodel: gpt2\n", "'model' is given twice"),
        ("no-blind: yes please\n", "no-blind: expected true or false"),
        ("- model\n", "expected flag: value lines"),
    ],
)  # fmt: skip
def test_config_file_refuses_what_it_cannot_read_exactly(
    tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(text, encoding="utf-8")
    code, out = _run(tmp_path, "--config", config, "--data", _data(tmp_path))
    assert code == 2 and out.startswith(f"error: --config {config}"), out
    assert message in out


def test_version() -> None:
    from imprint import __version__

    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"imprint {__version__}"


def test_an_unreachable_hub_is_known_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub_access, "hub_offline", lambda: False)
    monkeypatch.setattr(hub_access, "_PROBED", {})
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: refused at once
    start = time.monotonic()
    assert not hub_access.hub_reachable() and not hub_access.hub_reachable()  # asked once
    assert time.monotonic() - start < hub_access.PROBE_TIMEOUT + 1
    assert "did not accept a connection" in hub_access.hub_unreachable_reason()


def test_an_offline_hub_model_fails_in_seconds_with_the_advice(tmp_path: Path) -> None:
    start = time.monotonic()
    code, out = _run(
        tmp_path, "--model", "imprint-no-such-hub-model", "--data", _data(tmp_path, 10, 10),
        "--attacks", "loss", "--no-blind", "--device", "cpu", env={"HF_HUB_OFFLINE": "1"},
    )  # fmt: skip
    assert code == 2, out
    assert "model 'imprint-no-such-hub-model' is not in the local hub cache and the Hugging " \
        "Face hub is switched off (HF_HUB_OFFLINE is set)" in out  # fmt: skip
    assert "Offline, use a local folder, gguf:PATH or an alias" in out
    assert time.monotonic() - start < 30  # the hub client's retries alone took 55 s


def test_config_file_takes_every_run_flag(tmp_path: Path) -> None:
    """Every declared run option is a key of --config, typed as its declaration says."""
    import dataclasses
    import typing

    from typer.main import get_command

    from imprint.cli.options import RunOptions
    from imprint.cli.run_file import read_run_file

    hints = typing.get_type_hints(RunOptions)
    samples = {str: "x", int: 3, float: 0.5, bool: True, Path: "p"}
    lines = []
    for f in dataclasses.fields(RunOptions):
        if f.name == "config":
            continue
        kind = hints[f.name]
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        base = args[0] if typing.get_origin(kind) is not tuple and args else kind
        value = ["k=v"] if typing.get_origin(kind) is tuple else samples[base]
        flag = f.metadata["flags"][0] if f.metadata["flags"] else f"--{f.name.replace('_', '-')}"
        lines.append(f"{flag.lstrip('-')}: {json.dumps(value)}")  # the key is the flag
    path = tmp_path / "every.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    command = get_command(app).commands["run"]  # type: ignore[attr-defined]
    ctx = command.make_context("run", ["--config", str(path), "--seed", "7"])
    read = read_run_file(path, ctx, hints)
    declared = {f.name for f in dataclasses.fields(RunOptions)} - {"config"}
    assert set(read) == declared - {"seed"}  # --seed was typed: the command line wins
    options = RunOptions(**{k: tuple(v) if isinstance(v, list) else v for k, v in read.items()})
    assert options.n_per_label == 3 and options.di_power == 0.5 and options.no_blind is True
    assert options.out == Path("p") and options.model_arg == ("k=v",)
