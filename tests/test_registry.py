"""The generic Registry: lazy ``module:attr`` entries, duplicates, suggestions, entry points."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from imprint.errors import ConfigError, DataError
from imprint.registry import BUILTIN, PluginWarning, Registry


def _module(tmp_path: Path, name: str, body: str) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body))


def _dist(root: Path, dist: str, group: str, points: dict[str, str]) -> None:
    """A real installed distribution's metadata: importlib.metadata finds it on sys.path."""
    info = root / f"{dist.replace('-', '_')}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n")
    lines = "".join(f"{k} = {v}\n" for k, v in points.items())
    (info / "entry_points.txt").write_text(f"[{group}]\n{lines}")


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m.startswith("regtest_")]:
        del sys.modules[name]


def test_a_lazy_entry_is_imported_only_when_used(on_path):
    _module(on_path, "regtest_lazy", "VALUE = 42\nOTHER = 1\n")
    reg: Registry[int] = Registry("thing")
    reg.add("answer", "regtest_lazy:VALUE")
    assert "answer" in reg and reg.names() == ["answer"]
    assert "regtest_lazy" not in sys.modules  # listing names imports nothing
    assert reg.get("answer") == 42
    assert "regtest_lazy" in sys.modules
    assert reg.entries()[0].origin == BUILTIN and reg.entries()[0].loaded


def test_a_lazy_entry_that_fails_to_import_names_the_entry_and_the_module():
    reg: Registry[int] = Registry("thing")
    reg.add("gone", "regtest_no_such_module:VALUE")
    with pytest.raises(ConfigError, match=r"thing 'gone'.*regtest_no_such_module.*failed to load"):
        reg.get("gone")
    with pytest.raises(ConfigError, match="not 'module:attr'"):
        reg.add("bad", "no_colon_here")


def test_duplicates_are_refused_unless_forced():
    reg: Registry[int] = Registry("thing")
    reg.add("a", 1)
    with pytest.raises(ConfigError, match=r"thing 'a' is already registered.*force=True"):
        reg.add("a", 2)
    with pytest.raises(ConfigError, match="already registered"):
        reg.add("a", "math:pi")
    reg.add("a", 2, force=True)
    assert reg["a"] == 2


def test_unknown_names_suggest_close_ones_and_list_the_known(monkeypatch):
    reg: Registry[int] = Registry("thing", error=DataError)
    for name in ("loss", "zlib", "min_k"):
        reg.add(name, 0)
    with pytest.raises(DataError, match=r"unknown thing 'los'; did you mean loss\? \(known: loss"):
        reg.get("los")
    with pytest.raises(DataError, match=r"unknown thing 'qqq' \(known: loss, min_k, zlib\)"):
        reg.get("qqq")


def test_an_object_registering_itself_while_its_entry_imports_fills_the_entry(on_path):
    _module(
        on_path,
        "regtest_self",
        """
        from regtest_holder import REG

        @REG.register("me")
        class Me:
            pass
        """,
    )
    _module(
        on_path, "regtest_holder", "from imprint.registry import Registry\nREG = Registry('x')\n"
    )
    from regtest_holder import REG  # type: ignore[import-not-found]

    REG.add("me", "regtest_self:Me")
    cls = REG.get("me")
    assert cls.__name__ == "Me" and REG.names() == ["me"]
    with pytest.raises(ConfigError, match="already registered"):  # once loaded, it is taken
        REG.register("me")(cls)


def test_entry_points_are_found_once_listed_with_their_distribution_and_loaded_lazily(on_path):
    _module(on_path, "regtest_plugin", "THING = 'from a plugin'\n")
    _dist(on_path, "regtest-dist", "regtest.group", {"plugged": "regtest_plugin:THING"})
    reg: Registry[str] = Registry("thing", group="regtest.group")
    reg.add("builtin", "regtest_plugin:THING")
    assert reg.names() == ["builtin", "plugged"]
    assert "regtest_plugin" not in sys.modules
    origins = {e.name: (e.origin, e.version) for e in reg.entries()}
    assert origins == {"builtin": (BUILTIN, None), "plugged": ("plugin regtest-dist", "0.1")}
    assert reg.get("plugged") == "from a plugin"


def test_a_broken_plugin_is_warned_of_and_listed_never_raised_by_a_listing(on_path):
    _module(on_path, "regtest_broken", "raise RuntimeError('plugin bug')\n")
    _module(on_path, "regtest_fine", "OK = 1\n")
    points = {"broken": "regtest_broken:X", "fine": "regtest_fine:OK", "taken": "regtest_fine:OK"}
    _dist(on_path, "regtest-broken", "regtest.broken", points)
    reg: Registry[int] = Registry("thing", group="regtest.broken")
    reg.add("taken", 0, origin=BUILTIN)
    with pytest.warns(PluginWarning) as caught:
        loaded = reg.load_all()
    assert loaded == {"fine": 1, "taken": 0}
    messages = " ".join(str(w.message) for w in caught)
    assert "RuntimeError: plugin bug" in messages and "regtest-broken" in messages
    assert "already taken by built-in" in messages
    broken = {e.name: e.broken for e in reg.entries() if e.broken}
    assert set(broken) == {"broken"}  # the clash keeps the built-in, warned of above
    with pytest.raises(ConfigError, match="RuntimeError: plugin bug"):
        reg.get("broken")


def test_a_check_refuses_an_object_of_the_wrong_kind(on_path):
    _module(on_path, "regtest_kind", "NOT_INT = 'text'\n")

    def check(name: str, obj: object) -> int:
        if not isinstance(obj, int):
            raise ConfigError(f"{name} must be an int")
        return obj

    reg: Registry[int] = Registry("number", check=check)
    reg.add("n", "regtest_kind:NOT_INT")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert reg.load_all() == {}
    with pytest.raises(ConfigError, match="n must be an int"):
        reg.get("n")
    with pytest.raises(ConfigError, match="not 'module:attr'"):
        reg.add("x", "y")  # a string is a reference, refused as such
    with pytest.raises(ConfigError, match="x must be an int"):
        reg.add("x", 1.5)  # type: ignore[arg-type]


def test_copy_is_independent():
    reg: Registry[int] = Registry("thing")
    reg.add("a", 1)
    other = reg.copy()
    other.add("b", 2)
    assert reg.names() == ["a"] and other.names() == ["a", "b"]


def test_importing_the_attack_registry_imports_no_attack_module():
    code = (
        "import sys, imprint.attacks as a\n"
        "before = sorted(m for m in sys.modules if m.startswith('imprint.attacks.') "
        "and m.rsplit('.', 1)[1] not in ('base', 'contract', 'registry', 'params', 'shots'))\n"
        "a.get_attack_class('zlib')\n"
        "after = 'imprint.attacks.zlib' in sys.modules, 'imprint.attacks.loss' in sys.modules\n"
        "print(before, after)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "(True,", "False)"], out.stdout + out.stderr


def test_every_built_in_attack_module_is_a_lazy_table_entry():
    from imprint.attacks.registry import ATTACKS, BUILTIN_ATTACKS

    entries = {e.name: e for e in ATTACKS.entries()}
    built_in = {n for n, e in entries.items() if e.origin == BUILTIN}
    assert built_in == set(BUILTIN_ATTACKS), "add new attack modules to BUILTIN_ATTACKS"
    assert all(entries[n].ref == BUILTIN_ATTACKS[n] for n in BUILTIN_ATTACKS)


def test_backend_providers_are_imported_on_first_lookup_only():
    code = (
        "import sys; from imprint.backends import registry\n"
        "a = 'imprint.backends.providers' in sys.modules\n"
        "names = registry.BACKENDS.names()\n"
        "b = 'imprint.backends.providers' in sys.modules\n"
        "registry.get_provider('vllm')\n"
        "print(a, b, 'imprint.backends.providers' in sys.modules, names)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split(maxsplit=3)[:3] == ["False", "False", "True"], out.stdout + out.stderr
    assert "'gguf', 'hf', 'openai', 'openai-logprobs', 'vllm'" in out.stdout


def test_a_backend_entry_must_be_a_checked_provider_named_as_registered():
    from imprint.backends import registry
    from imprint.backends.options import HFOptions

    reg = registry.BACKENDS.copy()
    made = registry.make_provider(
        "echo", lambda c, x: None, options=HFOptions, capabilities=frozenset(), summary="s",
        example="echo:x",
    )  # fmt: skip
    reg.add("echo", made)
    with pytest.raises(ConfigError, match="provider is named 'echo'"):
        reg.add("other", made)
    with pytest.raises(ConfigError, match="must be an imprint.backends.BackendProvider"):
        reg.add("thing", object())
    with pytest.raises(ConfigError, match="options must be a dataclass"):
        registry.make_provider(
            "bad", lambda c, x: None, options=int, capabilities=frozenset(), summary="",
            example="",
        )  # fmt: skip


def test_game_schemes_and_the_legacy_start_rule_resolve_without_importing_imprint_game():
    code = textwrap.dedent(
        """
        import sys
        from imprint.backends.models import model_schemes, resolve_model
        from imprint.backends.start_token import _RULES
        from imprint.data import resolve_data
        from imprint.errors import ConfigError, DataError
        print('imprint.game' in sys.modules, model_schemes(), _RULES.names())
        for call, err in ((resolve_model, ConfigError), (resolve_data, DataError)):
            try:
                call('game:/no/such/game')
            except err as e:
                print(type(e).__name__, 'imprint game build' in str(e))
        print('imprint.game' in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "False ('game',) ['game-format-4']", out.stdout + out.stderr  # entry points
    assert lines[1:] == ["ConfigError True", "DataError True", "True"]


def test_an_attack_name_that_the_command_line_could_not_parse_is_refused():
    from imprint.attacks.registry import ATTACKS, register

    class Probe(ATTACKS.get("loss")):  # type: ignore[misc,valid-type]
        pass

    for bad in ("a,b", "a.b", "a=b", "two words", "", "9lives"):
        with pytest.raises(ConfigError, match="attack name"):
            register(bad)(Probe)
    assert all(n in ATTACKS.names() for n in ("loss", "min_k_pp"))


def test_a_broken_module_in_the_attacks_package_is_warned_of_and_the_rest_still_listed(tmp_path):
    tree = tmp_path / "src"
    shutil.copytree(Path(__file__).resolve().parents[1] / "src" / "imprint", tree / "imprint")
    (tree / "imprint" / "attacks" / "half_written.py").write_text("def oops(:\n")
    env = {**os.environ, "PYTHONPATH": str(tree)}
    listed = subprocess.run(
        [sys.executable, "-m", "imprint", "attacks"], env=env, capture_output=True, text=True
    )
    assert listed.returncode == 0, listed.stderr
    assert "imprint.attacks.half_written failed to import (SyntaxError" in listed.stderr
    assert "PluginWarning" in listed.stderr
    assert any(line.startswith("loss ") for line in listed.stdout.splitlines())


def test_imprint_backends_describes_each_offline_alias():
    from typer.testing import CliRunner

    from imprint.backends.models import ALIASES
    from imprint.cli import app

    wide = {"COLUMNS": "400"}  # each entry on one line (a pipe wraps at 80 columns)
    lines = CliRunner().invoke(app, ["backends"], env=wide).output.splitlines()
    for alias in ALIASES:
        (line,) = [line for line in lines if line.startswith(alias + " ")]
        assert (
            "alias: " in line and "served by hf" in line and "GGUF" in line and "installed" in line
        )
    assert any("SmolLM2-135M-Instruct (instruct)" in line for line in lines)
