"""Explicit contracts: backends subclass one Backend base whose optional capabilities are methods
(a missing one raises a one-line CapabilityError naming backend and capability), access levels are
an Access enum, attacks have one entry point, and nothing probes a contract with getattr."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from imprint.attacks import build_attacks, get_attack_class
from imprint.attacks.base import Attack, RunContext, ScoringInputs, available_attacks
from imprint.attacks.model_calls import ModelCallAttack
from imprint.backends.base import (
    GRADIENTS,
    LOGPROBS,
    SAMPLING,
    TOKEN_LOGPROBS,
    TOKENS,
    Access,
    Backend,
    Capability,
    SamplingSettings,
    ScoreRequest,
    TokenStats,
)
from imprint.backends.hf import HFLogprobBackend
from imprint.backends.http import OpenAICompatibleBackend
from imprint.backends.tempered import TemperedBackend
from imprint.backends.text import HFTextBackend, VLLMTextBackend, as_text_backend
from imprint.backends.vllm_logprobs import VLLMBackend
from imprint.errors import CapabilityError, ConfigError
from imprint.signals.needs import Need, SignalSet

SRC = Path(__file__).resolve().parents[1] / "src" / "imprint"


class Bare(Backend):
    """A backend that declares nothing but its identity."""

    name = "bare"
    spec = "bare:x"
    fingerprint = "bare-v1"


def stats(logp: list[float]) -> TokenStats:
    n = len(logp)
    return TokenStats(
        token_ids=np.arange(n, dtype=np.int32),
        logp=np.asarray(logp, np.float32),
        mean_logp=np.full(n, -1.0, np.float32),
        var_logp=np.ones(n, np.float32),
        rank=np.ones(n, np.int32),
        argmax=np.zeros(n, np.int32),
    )


# -- backend base ---------------------------------------------------------------------------------
def test_every_backend_class_subclasses_backend():
    for cls in (
        HFLogprobBackend,
        TemperedBackend,
        HFTextBackend,
        VLLMTextBackend,
        VLLMBackend,
        OpenAICompatibleBackend,
    ):
        assert issubclass(cls, Backend), cls


def test_base_defaults_are_declared_members():
    backend = Bare()
    assert backend.describe() == {"spec": "bare:x", "fingerprint": "bare-v1"}
    assert backend.usage() == {}
    assert backend.close() is None
    assert backend.max_length is None and backend.token_budget is None
    assert backend.batch_tokens is None and backend.vocab_size is None
    assert backend.reports_progress is False and backend.seeds_per_prompt is False
    assert backend.local_model() is None
    assert not any(backend.supports(c) for c in Capability)
    with backend as entered:
        assert entered is backend


@pytest.mark.parametrize(
    ("call", "capability"),
    [
        (lambda b: b.score([ScoreRequest("a text")]), LOGPROBS),
        (lambda b: b.sample(["a"], SamplingSettings(1, 4)), SAMPLING),
        (lambda b: b.text_backend(), SAMPLING),
        (lambda b: b.encode("a text"), TOKENS),
        (lambda b: b.count_tokens(["a text"]), TOKENS),
        (lambda b: b.gradient_norms(["a text"]), GRADIENTS),
    ],
)
def test_a_missing_capability_raises_one_line_naming_backend_and_capability(call, capability):
    with pytest.raises(CapabilityError) as err:
        call(Bare())
    message = str(err.value)
    assert "\n" not in message
    assert "'bare' (Bare)" in message and f"cannot serve {capability.value}" in message
    assert "; use " in message  # says what would serve it


def test_require_names_the_purpose_and_passes_when_declared():
    class Sampler(Bare):
        capabilities = frozenset({SAMPLING})

    Sampler().require(SAMPLING, "attack samia")
    with pytest.raises(CapabilityError, match=r"gradients \(parameter gradients\), which attack"):
        Sampler().require(GRADIENTS, "attack gradnorm")


def test_a_backend_without_a_fingerprint_says_how_to_add_one():
    class Nameless(Backend):
        pass

    with pytest.raises(NotImplementedError, match="Nameless defines no fingerprint"):
        _ = Nameless().fingerprint


def test_old_capability_strings_are_the_enum_values():
    assert {LOGPROBS, GRADIENTS, SAMPLING, TOKEN_LOGPROBS} == {
        "logprobs",
        "gradients",
        "sampling",
        "token_logprobs",
    }
    assert LOGPROBS in frozenset({"logprobs"}) and "sampling" in frozenset({SAMPLING})
    assert json.dumps(sorted({SAMPLING, TOKEN_LOGPROBS})) == '["sampling", "token_logprobs"]'


def test_hf_backend_serves_its_capabilities_through_members(tiny_model_dir):
    hf = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    assert hf.supports(LOGPROBS) and hf.supports(TOKENS) and hf.supports(GRADIENTS)
    assert hf.local_model() is hf and hf.vocab_size == hf.model.config.vocab_size
    assert hf.batch_tokens == hf.token_budget  # one forward on CPU
    sampler = hf.text_backend()
    assert isinstance(sampler, HFTextBackend) and sampler.local_model() is hf
    assert as_text_backend(hf).fingerprint == sampler.fingerprint  # same store keys as before
    assert sampler.spec == hf.spec and sampler.text_backend() is sampler
    assert "usage" not in hf.describe() and hf.usage() == {}
    hidden = torch.randn(3, hf.model.config.hidden_size)
    tempered = TemperedBackend(hf, 2.0)
    np.testing.assert_array_equal(tempered.head(hidden).detach(), hf.head(hidden).detach() / 2)
    assert tempered.local_model() is tempered  # its own (scaled) head, not the base's


def test_api_backend_is_text_only():
    api = OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m", api_key_env=None)
    try:
        assert api.text_backend() is api and api.local_model() is None
        assert api.vocab_size is None and api.max_length is None
        with pytest.raises(CapabilityError, match="cannot serve logprobs"):
            api.score([ScoreRequest("x")])
        with pytest.raises(CapabilityError, match="cannot serve tokens"):
            api.encode("x")
    finally:
        api.close()


# -- access ---------------------------------------------------------------------------------------
def test_access_values_are_the_manifest_strings():
    assert [a.value for a in Access] == ["gray-box", "token-logprobs", "black-box", "white-box"]
    assert f"{Access.BLACK_BOX:<10}|" == "black-box |"  # `imprint attacks` column
    assert json.dumps({"access": Access.GRAY_BOX}) == '{"access": "gray-box"}'
    assert Access.of({LOGPROBS, SAMPLING, GRADIENTS}) is Access.GRAY_BOX
    assert Access.of({SAMPLING, TOKEN_LOGPROBS}) is Access.TOKEN_LOGPROBS
    assert Access.of({SAMPLING}) is Access.BLACK_BOX


def test_every_attack_declares_an_access_member():
    for name, cls in available_attacks().items():
        assert isinstance(cls.access, Access), name


def test_run_context_takes_access_strings_and_refuses_unknown_ones():
    assert RunContext(target_access="black-box").target_access is Access.BLACK_BOX
    names = {type(a).name for a in build_attacks(["all"], RunContext(target_access="black-box"))}
    assert names and all(get_attack_class(n).access is Access.BLACK_BOX for n in names)
    with pytest.raises(ConfigError, match="unknown target access 'grey-box'; use one of"):
        RunContext(target_access="grey-box")


# -- one attack entry point -----------------------------------------------------------------------
def test_attack_score_takes_scoring_inputs_or_a_bare_signal_set():
    texts = ["a b", "c d e"]
    signals = SignalSet(texts, {Need(): [(stats([-1.0, -3.0]),), (stats([-2.0] * 3),)]})
    loss = get_attack_class("loss")()
    via_inputs = loss.score(ScoringInputs(tuple(texts), signals=signals))
    assert via_inputs["loss"] == pytest.approx([-2.0, -2.0])
    assert loss.score(signals)["loss"] == pytest.approx(via_inputs["loss"])
    with pytest.raises(ConfigError, match="'loss' scores log-prob signals, but none were given"):
        loss.score(ScoringInputs(tuple(texts)))


def test_model_call_attacks_score_through_the_inputs_requests():
    class Echo(ModelCallAttack):
        name = "echo"

        def score_with_requests(self, requests, texts, **kwargs):
            return {self.name: np.array([len(requests.backend("target").spec + t) for t in texts])}

    class Requests:
        def backend(self, role):
            return Bare()

    out = Echo().score(ScoringInputs(("ab", "abc"), requests=Requests()))
    assert out["echo"].tolist() == [len("bare:x") + 2, len("bare:x") + 3]
    with pytest.raises(ConfigError, match="echo calls the model itself and was given no request"):
        Echo().score(ScoringInputs(("ab",)))
    assert Echo().needs() == () and Echo().check_backend(Bare()) is None


# -- no getattr probes ----------------------------------------------------------------------------
# names every object has (a catalog entry's name is no backend's): not a contract probe
_GENERIC = {"name"}
# members that used to be probed and are gone or private
_RETIRED = {"needs_backend", "_head"}


def contract_members() -> set[str]:
    public = {n for cls in (Backend, Attack) for n in dir(cls) if not n.startswith("__")}
    return (public | _RETIRED) - _GENERIC


def contract_probes(root: Path) -> list[str]:
    """``getattr(x, "<member>", default)`` and ``hasattr(x, "<member>")`` calls under ``root``."""
    members, found = contract_members(), []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)):
                continue
            probe = (node.func.id == "getattr" and len(node.args) == 3) or (
                node.func.id == "hasattr" and len(node.args) == 2
            )
            name = node.args[1] if probe else None
            if isinstance(name, ast.Constant) and name.value in members:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_scan_finds_a_probe(tmp_path):
    (tmp_path / "m.py").write_text(
        "x = getattr(b, 'max_length', None)\ny = hasattr(b, 'encode')\n"
        "z = getattr(b, 'config')\nw = getattr(c, 'name', '?')\n"
    )
    assert contract_probes(tmp_path) == [
        "m.py:1: getattr(b, 'max_length', None)",
        "m.py:2: hasattr(b, 'encode')",
    ]


def test_no_getattr_probe_on_a_backend_or_attack_contract():
    assert contract_probes(SRC) == []


def test_a_text_backend_wraps_a_loaded_model_not_a_spec():
    with pytest.raises(ConfigError, match=r"wraps a loaded local model, not a spec \('m'\)"):
        HFTextBackend("m")


# -- no import circle in the contracts' packages --------------------------------------------------
def module_imports(package: str) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports anywhere (function bodies and
    TYPE_CHECKING blocks included: a lazy import is still an arrow)."""
    root = SRC / package.removeprefix("imprint.").replace(".", "/")
    modules = {f"{package}.{p.stem}" for p in root.glob("*.py") if p.stem != "__init__"}
    graph: dict[str, set[str]] = {}
    for module in modules:
        tree = ast.parse((root / f"{module.rsplit('.', 1)[1]}.py").read_text(encoding="utf-8"))
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        graph[module] = (found & modules) - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import circle, each as the path that closes it (depth-first search)."""
    found, done = [], set()

    def visit(node: str, path: list[str]) -> None:
        if node in path:
            found.append(path[path.index(node) :] + [node])
            return
        if node in done:
            return
        for nxt in sorted(graph[node]):
            visit(nxt, [*path, node])
        done.add(node)

    for start in sorted(graph):
        visit(start, [])
    return found


def test_the_circle_finder_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]


@pytest.mark.parametrize("package", ["imprint.backends", "imprint.attacks"])
def test_no_import_circle(package):
    assert cycles(module_imports(package)) == []


def test_an_embedder_without_a_fingerprint_is_refused_with_how_to_fix():
    from imprint.requests.client import in_memory_requests

    class Unnamed:
        def embed(self, strings):
            return np.ones((len(strings), 2)) / np.sqrt(2)

    with pytest.raises(ConfigError, match="embedder Unnamed needs a `fingerprint`"):
        in_memory_requests(Bare(), embedder=Unnamed()).embed(["a word"])
