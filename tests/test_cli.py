"""The CLI package: one error handler, one list parser, one KEY=VALUE parser, one progress
factory; the orchestrator (imprint.run) imports no stage above it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from imprint.cli import app
from imprint.cli.common import (
    handle_errors,
    parse_key_values,
    parse_list,
    progress_bars,
    split_key_value,
)
from imprint.cli.flags import config_from_flags
from imprint.cli.run import parse_params, parse_refs, run_config_kwargs
from imprint.errors import ConfigError, DataError

SRC = Path(__file__).resolve().parents[1] / "src" / "imprint"
runner = CliRunner()
# a long folder name in three scripts: the error must name it whole, on one line
ODD = "данные 数据 ملف :cat: " + "ü" * 60 + " [bold]x[/bold]"


def _one_line_error(result: object, must_name: str) -> str:
    output: str = result.output  # type: ignore[attr-defined]
    assert result.exit_code == 2, output  # type: ignore[attr-defined]
    assert "Traceback" not in output
    assert not isinstance(result.exception, (ImportError, AssertionError, TypeError))  # type: ignore[attr-defined]
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    assert must_name in lines[0], output
    return lines[0]


# -- the error handler ---------------------------------------------------------------------------


def _commands(tmp: Path) -> dict[str, list[str]]:
    """One call per command that fails on bad input before any model loads."""
    missing = str(tmp / ODD / "missing.jsonl")
    out_file = tmp / "a file.txt"
    out_file.write_text("not a run folder")
    data = tmp / "d.jsonl"
    data.write_text(json.dumps({"text": "ein Text", "label": 1}) + "\n")
    return {
        "run": ["run", "--model", "smollm2-135m", "--data", str(data), "--out", str(out_file)],
        "blind": ["blind", "--data", missing],
        "overlap build": ["overlap", "build", "--corpus", missing, "--out", str(tmp / "i")],
        "overlap add": ["overlap", "add", "--index", str(tmp / ODD), "--corpus", missing],
        "overlap merge": ["overlap", "merge", str(tmp / ODD), str(tmp / "i2"),
                          "--out", str(tmp / "m")],
        "overlap score": ["overlap", "score", "--index", str(tmp / ODD), "--data", missing],
        "data filter": ["data", "filter", "--data", missing, "--index", str(tmp / ODD),
                        "--out", str(tmp / "f.jsonl"), "--preset", "ngram_99_" + ODD],
        "data build-temporal": ["data", "build-temporal", "--dump", missing, "--out",
                                str(tmp / "t"), "--member-before", "2020-01-01",
                                "--nonmember-after", "2021-01-01"],
        "perturb": ["perturb", "--data", missing, "--out", str(tmp / "p")],
        "perturb-table": ["perturb-table", str(tmp / ODD)],
        "compare": ["compare", str(tmp / ODD), str(tmp / ODD)],
        "game build": ["game", "build", "--pool", missing, "--method", "magic" + ODD],
        "game show": ["game", "show", str(tmp / ODD)],
        "demo": ["demo", "--epochs", "", "--out", str(tmp / ODD)],
        "experiment": ["experiment", missing],
        "canaries make": ["canaries", "make", "--n", "24", "--out", str(tmp / "c"),
                          "--design", "magic" + ODD],
        "audit": ["audit", "--model", "smollm2-135m", "--canaries", str(tmp / ODD),
                  "--out", str(tmp / "a")],
        "duci": ["duci", "--model", "smollm2-135m", "--references", str(tmp / ODD),
                 "--data", missing],
        "view": ["view", str(tmp / ODD / "runs")],
    }  # fmt: skip


NAMED = {
    "run": "a file.txt",
    "data filter": ODD,
    "game build": ODD,
    "demo": "epochs",
}


COMMANDS = [
    "audit", "blind", "canaries make", "compare", "data build-temporal", "data filter", "demo",
    "duci", "experiment", "game build", "game show",
    "overlap add", "overlap build", "overlap merge", "overlap score", "perturb", "perturb-table",
    "run", "view",
]  # fmt: skip


def test_every_command_is_covered(tmp_path: Path):
    group = typer.main.get_command(app)
    names = []
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        subs = getattr(command, "commands", None)
        names += [f"{name} {sub}" for sub in subs] if subs else [name]
    listings = {"attacks", "backends", "datasets"}  # take no input that could be wrong
    assert sorted(set(names) - listings) == COMMANDS == sorted(_commands(tmp_path))


@pytest.mark.parametrize("command", COMMANDS)
def test_an_imprint_error_in_any_command_is_one_line_and_exit_2(command: str, tmp_path: Path):
    (tmp_path / ODD).mkdir(parents=True)
    result = runner.invoke(app, _commands(tmp_path)[command])
    line = _one_line_error(result, NAMED.get(command, ODD))
    assert "[bold]x[/bold]" in line or command in NAMED  # markup in a path is printed as text


def test_the_handler_joins_lines_keeps_brackets_and_lets_bugs_through(monkeypatch):
    monkeypatch.setattr("imprint.cli.common.console.width", 40)

    @handle_errors
    def broken(kind: str) -> None:
        if kind == "imprint":
            raise DataError("first line\nsecond [red]line[/red] " + "ж" * 80)
        if kind == "value":
            raise ValueError("")
        raise RuntimeError("a bug, not a user error")

    probe = typer.Typer()
    probe.command()(broken)
    line = _one_line_error(runner.invoke(probe, ["imprint"]), "first line second [red]line[/red]")
    assert line.endswith("ж" * 80)  # not wrapped at the console width
    assert _one_line_error(runner.invoke(probe, ["value"]), "ValueError")
    bug = runner.invoke(probe, ["bug"])
    assert bug.exit_code == 1 and isinstance(bug.exception, RuntimeError)


def test_a_usage_error_from_a_parser_names_the_option():
    result = runner.invoke(app, ["compare", "a", "b", "--fprs", "0.01,one"])
    assert result.exit_code == 2 and "--fprs" in result.output and "'one'" in result.output


# -- the parsers ---------------------------------------------------------------------------------


def test_parse_list_strips_skips_empty_items_and_converts():
    assert parse_list(" loss, zlib ,,min_k ", option="--attacks") == ("loss", "zlib", "min_k")
    assert parse_list("", option="--repetitions", convert=int) == ()
    assert parse_list(" , ", option="--attacks") == ()
    assert parse_list("данные,数据,ملف", option="--x") == ("данные", "数据", "ملف")
    assert parse_list("1, 10,١٠٠", option="--repetitions", convert=int) == (1, 10, 100)
    assert parse_list("0.01,1e-3", option="--fprs", convert=float) == (0.01, 0.001)
    many = ",".join(str(i) for i in range(20_000))
    assert parse_list(many, option="--n", convert=int) == tuple(range(20_000))


@pytest.mark.parametrize("text", ["1,x", "1，10", "1;10", "2.5"])
def test_parse_list_refuses_a_bad_item_naming_option_item_and_example(text: str):
    with pytest.raises(typer.BadParameter) as err:
        parse_list(text, option="--repetitions", convert=int, example="1,10,100")
    message = err.value.format_message()
    bad = text.split(",")[-1] if "," in text else text
    assert "--repetitions" in message and "1,10,100" in message and repr(bad) in message
    assert "int" in message


def test_parse_key_values_keeps_values_whole_and_refuses_ambiguity():
    parsed = parse_key_values(
        [" dtype =bfloat16", "prompt=a=b, c", "empty=", "ключ=значение 数据"],
        option="--model-arg",
        example="dtype=bfloat16",
    )
    assert parsed == {"dtype": "bfloat16", "prompt": "a=b, c", "empty": "", "ключ": "значение 数据"}
    assert list(parsed) == ["dtype", "prompt", "empty", "ключ"]
    for bad in (["dtype"], ["=x"], [" =x"], ["a=1", "a =2"]):
        with pytest.raises(typer.BadParameter) as err:
            parse_key_values(bad, option="--model-arg", example="dtype=bfloat16")
        assert "--model-arg" in err.value.format_message()
    assert split_key_value("n=" + "9" * 5000, option="--x", example="n=1") == ("n", "9" * 5000)


def test_param_ref_and_pool_parsing():
    assert parse_params(["min_k.k=0.1", "min_k.sweep=0.1,0.3", "pac.n_aug=2"]) == {
        "min_k": {"k": "0.1", "sweep": "0.1,0.3"},
        "pac": {"n_aug": "2"},
    }
    for bad in (["min_k=0.1"], [".k=1"], ["min_k.=1"], ["min_k.k"], ["a.b=1", "a.b=2"]):
        with pytest.raises(typer.BadParameter) as err:
            parse_params(bad)
        assert "--param" in err.value.format_message()
    assert parse_refs(["base=smollm2-135m", "/models/ref", "gguf:/x.gguf"]) == (
        ("base", "smollm2-135m"),
        ("ref2", "/models/ref"),
        ("ref3", "gguf:/x.gguf"),
    )
    with pytest.raises(typer.BadParameter) as err:
        parse_refs(["=spec"])
    assert "--ref" in err.value.format_message()


def _defaults(command_name: str, group: typer.Typer = app) -> dict[str, object]:
    command = typer.main.get_command(group).commands[command_name]  # type: ignore[attr-defined]
    return {p.name: p.default for p in command.params if p.name}


def test_every_run_option_reaches_the_run_config(tiny_model_dir: Path, tmp_path: Path):
    """A renamed or forgotten option would fail here: RunConfig takes every field by name, and
    every declared run option is read by run_config_kwargs (or by the command itself)."""
    import dataclasses
    import inspect

    from imprint.cli.options import RunOptions
    from imprint.cli.run import run

    options = RunOptions(
        model=str(tiny_model_dir), data="wikimia:32", out=tmp_path / "o", attacks="loss, zlib",
        ref=("base=" + str(tiny_model_dir),), pool=("p=x.jsonl",), param=("min_k.k=0.2",),
        no_blind=True, truncate=7, bootstrap=11, device="cpu",
    )  # fmt: skip
    config = config_from_flags(**run_config_kwargs(options))
    assert config.attacks == ("loss", "zlib") and config.refs == (("base", str(tiny_model_dir)),)
    assert config.pools == {"p": "x.jsonl"} and config.params == {"min_k": {"k": "0.2"}}
    assert (config.blind, config.truncate_words, config.n_bootstrap) == (False, 7, 11)
    assert config.shared_args == {"device": "cpu"}
    # the command's flags are the declaration's fields, one for one
    declared = {f.name for f in dataclasses.fields(RunOptions)}
    assert set(inspect.signature(run).parameters) - {"ctx"} == declared


def test_every_game_build_option_reaches_the_game_config():
    from imprint.cli.game import _game_config, game_app

    options = _defaults("build", game_app)
    for name in ("out", "force", "device", "reference_models"):  # the command uses these itself
        options.pop(name)
    options.update(words=0, pool="pool.txt", lora_targets="q_proj, v_proj", repetitions="")
    config = _game_config(options)
    assert config.words is None and config.lora_targets == ("q_proj", "v_proj")
    assert config.canary_repetitions == () and config.lora_alpha == 2 * config.lora_rank


# -- the progress factory ------------------------------------------------------------------------


def test_progress_factory_counts_every_corpus_byte(tmp_path: Path):
    from imprint.diagnostics.overlap import build_index

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(f"строка {i} 数据 ملف one two three" for i in range(300)) + "\n")
    seen: dict[str, list[int]] = {}

    def factory(label: str, total: int):
        seen[label] = [total, 0]
        return lambda n: seen[label].__setitem__(1, seen[label][1] + n)

    build_index([corpus], [3], tmp_path / "idx", progress=factory, measure_fp=False)
    size = corpus.stat().st_size
    assert seen == {
        "counting n-grams (bytes)": [size, size],
        "indexing n-grams (bytes)": [size, size],
    }
    with progress_bars(enabled=False) as quiet:
        quiet("nothing", 3)(3)
    with progress_bars() as bars:
        advance = bars("work", 2)
        advance(1)
        advance(1)


# -- the orchestrator imports nothing above it ----------------------------------------------------


def _imports_run(source: str, module: str) -> list[int]:
    """Lines of ``source`` (the module ``module``) importing imprint.run in any spelling."""
    tree = ast.parse(source)
    package = module.rsplit(".", 1)[0]
    lines = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            names = [base, *(f"{base}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Call) and any(
            isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args
        ):
            names = [a.value for a in node.args if isinstance(a, ast.Constant)]  # import_module
        if any(n == "imprint.run" or str(n).startswith("imprint.run.") for n in names):
            lines.append(node.lineno)
    return lines


def test_the_scan_sees_every_spelling():
    seen = [
        _imports_run(code, "imprint.game.demo")
        for code in (
            "import imprint.run",
            "from imprint.run import RunConfig",
            "from imprint import run",
            "from .. import run",
            "from ..run import execute_run",
            "importlib.import_module('imprint.run')",
        )
    ]
    assert all(seen), seen
    assert not _imports_run("from imprint import runs\nfrom .run import x", "imprint.game.demo")


def _imports_of(source: str, module: str) -> set[str]:
    """Every imprint module ``source`` (the module ``module``) imports, in any spelling."""
    package = module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            found |= {base, *(f"{base}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Call):
            found |= {a.value for a in node.args if isinstance(a, ast.Constant)
                      and isinstance(a.value, str) and a.value.startswith("imprint.")}  # fmt: skip
    return {n for n in found if n.startswith("imprint.")}


def test_the_orchestrator_imports_no_stage_above_it():
    """imprint.run is used by the games, grids and the command line; it imports none of them
    (model and data schemes such as game:DIR are resolved by name through the registries)."""
    above = ("imprint.cli", "imprint.study", "imprint.game", "imprint.calibration")
    offenders = {}
    for path in sorted((SRC / "run").rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        bad = sorted(n for n in _imports_of(path.read_text(encoding="utf-8"), module)
                     if n.startswith(above))  # fmt: skip
        if bad:
            offenders[module] = bad
    assert offenders == {}
    assert not (SRC / "diagnostics" / "cli.py").exists() and not (SRC / "game" / "cli.py").exists()


def test_listing_attacks_imports_no_torch():
    code = """
import sys
from typer.testing import CliRunner
from imprint.cli import app
res = CliRunner().invoke(app, ["attacks"])
heavy = sorted(m for m in ("torch", "transformers", "sklearn", "imprint.run") if m in sys.modules)
print(res.exit_code, len(res.output.splitlines()), heavy)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    code_, lines, heavy = proc.stdout.split(" ", 2)
    assert code_ == "0" and int(lines) >= 16 and heavy.strip() == "[]"


def test_config_errors_from_the_library_keep_their_text(tmp_path: Path):
    with pytest.raises(ConfigError, match="choose from"):
        from imprint.diagnostics.decontam import resolve_bound

        resolve_bound("ngram_99_0.5")
    result = runner.invoke(app, ["data", "filter", "--data", "x", "--index", str(tmp_path),
                                 "--out", str(tmp_path / "f.jsonl")])  # fmt: skip
    _one_line_error(result, "--preset")
