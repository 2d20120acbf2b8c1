"""Backend registry: schemes -> providers, typed --model-arg options, the manifest entry, vLLM
through `imprint run`, and no process-wide side effects from loading a backend or a CSV."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from imprint.backends import registry
from imprint.backends.base import LOGPROBS, SAMPLING, TOKEN_LOGPROBS, ScoreRequest
from imprint.backends.options import HFOptions, OpenAIOptions, VLLMOptions
from imprint.backends.registry import LoadContext, choose_backend, get_provider, provider_for
from imprint.backends.scoped import SDPA_GQA_ENV
from imprint.cli import app
from imprint.cli.flags import config_from_flags
from imprint.errors import ConfigError, MissingDependencyError
from imprint.run import RunConfig, execute_run, resolve

API = "http://127.0.0.1:9/v1"  # nothing listens: these tests never send a request


@pytest.fixture
def no_vllm(monkeypatch):
    """vllm absent, whatever this machine has installed (None in sys.modules blocks the import)."""
    monkeypatch.setitem(sys.modules, "vllm", None)


@pytest.fixture
def fake_vllm(monkeypatch):
    """vllm.LLM replaced by tests/vllm_standin.py (vLLM itself is not installable here)."""
    from vllm_standin import install

    return install(monkeypatch)


def _texts(path: Path, n: int = 6) -> Path:
    """Labelled texts, Latin and not, long enough for SaMIA's prefix/suffix split."""
    seeds = [
        "The committee met in Geneva to discuss the annual budget and the new rules",
        "Учёные из Новосибирска описали новый вид бактерий в озере Байкал прошлой весной",
        "東京の研究者は 新しい 電池 の 試作品 を 発表 し 来年 の 量産 を 目指す と 述べた",
        "Hurricane Ana moved west across the Pacific and weakened before reaching Hawaii",
    ]
    rows = [{"text": f"{seeds[i % len(seeds)]} {i}", "label": i % 2} for i in range(2 * n)]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


# -- lookups ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "provider", "target"),
    [
        ("smollm2-135m", "hf", "smollm2-135m"),
        ("hf:HuggingFaceTB/SmolLM2-135M", "hf", "hf:HuggingFaceTB/SmolLM2-135M"),
        ("owner/name", "hf", "owner/name"),
        ("gguf:/models/m.Q4_1.gguf", "gguf", "gguf:/models/m.Q4_1.gguf"),
        ("game:/runs/game-1", "hf", "game:/runs/game-1"),
        ("модель/тест", "hf", "модель/тест"),  # not a scheme: a hub-id-shaped name
    ],
)
def test_each_scheme_finds_its_provider(spec, provider, target):
    choice = choose_backend(spec)
    assert (choice.provider.name, choice.target, choice.spec) == (provider, target, spec)
    assert isinstance(choice.options, HFOptions)
    assert {LOGPROBS, SAMPLING} <= choice.provider.capabilities


def test_a_local_folder_with_a_colon_and_non_latin_name_is_a_folder(tiny_model_dir, tmp_path):
    folder = tmp_path / "модель:v2 模型"
    shutil.copytree(tiny_model_dir, folder)
    choice = choose_backend(str(folder))
    assert choice.provider.name == "hf"
    backend = choice.load(LoadContext(name="target", token_budget=256))
    (stats,) = backend.score([ScoreRequest("Привет, мир! 你好，世界。" * 30)])
    assert len(stats) == len(backend.encode("Привет, мир! 你好，世界。" * 30))
    assert np.isfinite(stats.logp).all()


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "gpt-4o-mini", "llama3:8b", "vllm:x"])
def test_with_api_base_the_model_string_is_the_apis_model_name(spec):
    choice = choose_backend(spec, api_base=API)
    assert choice.provider.name == "openai" and choice.api_base == API
    assert choice.target == spec.removeprefix("openai:")  # llama3:8b stays whole
    assert choice.provider.capabilities == frozenset({SAMPLING})


def test_openai_scheme_without_api_base_says_to_add_it():
    with pytest.raises(ConfigError, match=r"--api-base URL"):
        choose_backend("openai:gpt-4o-mini")


def test_vllm_without_vllm_names_the_extra(no_vllm):
    with pytest.raises(MissingDependencyError, match=r"pip install 'llm-imprint\[vllm\]'"):
        choose_backend("vllm:meta-llama/Llama-3.2-1B")


def test_vllm_scheme_with_vllm_present_samples_and_scores_prompt_tokens(fake_vllm):
    choice = choose_backend("vllm:meta-llama/Llama-3.2-1B")
    assert choice.provider.name == "vllm" and choice.target == "meta-llama/Llama-3.2-1B"
    assert choice.provider.capabilities == frozenset({SAMPLING, TOKEN_LOGPROBS})
    assert isinstance(choice.options, VLLMOptions)


@pytest.mark.parametrize(
    ("spec", "hint"),
    [("vlm:x", "did you mean vllm"), ("gmae:/g", "did you mean game"), ("opnai:m", "openai")],
)
def test_an_unknown_scheme_says_what_is_close_and_what_exists(spec, hint):
    with pytest.raises(ConfigError, match="unknown model scheme") as err:
        choose_backend(spec)
    message = str(err.value)
    assert hint in message and "gguf:" in message and "hf:" in message


@pytest.mark.parametrize("spec", ["hf:", "vllm:  ", "gguf:"])
def test_a_scheme_with_no_model_after_it_is_refused_with_an_example(spec, fake_vllm):
    with pytest.raises(ConfigError, match=r"names no model.*e\.g\. --model"):
        choose_backend(spec)


def test_register_rejects_duplicates_and_bad_names_and_force_replaces(monkeypatch):
    monkeypatch.setattr(registry, "BACKENDS", registry.BACKENDS.copy())
    loaded = []

    @registry.register(
        "echo", options=HFOptions, capabilities=frozenset({SAMPLING}), summary="s", example="e:x"
    )
    def load_echo(choice, context):
        loaded.append((choice.target, context.name, choice.options.device))
        return "backend"

    assert choose_backend("echo:a:b", args={"device": "cpu"}).load() == "backend"
    assert loaded == [("a:b", "target", "cpu")]
    with pytest.raises(ConfigError, match="already registered"):
        registry.register(
            "echo", options=HFOptions, capabilities=frozenset(), summary="", example=""
        )(load_echo)
    registry.register(
        "echo", options=HFOptions, capabilities=frozenset(), summary="", example="", force=True
    )(load_echo)
    assert get_provider("echo").capabilities == frozenset()
    for bad in ("e", "Echo", "e:x", "9x"):
        with pytest.raises(ConfigError, match="backend name"):
            registry.register(
                bad, options=HFOptions, capabilities=frozenset(), summary="", example=""
            )
    with pytest.raises(ConfigError, match="did you mean echo"):
        get_provider("ecko")


def test_importing_and_using_the_registry_imports_no_torch_vllm_or_httpx():
    code = (
        "import sys; from imprint.backends.registry import choose_backend\n"
        "choose_backend('smollm2-135m'); choose_backend('gguf:/m.gguf')\n"
        "choose_backend('m', api_base='http://127.0.0.1:9/v1', args={'mode': 'chat'})\n"
        "print(sorted(m for m in ('torch', 'transformers', 'vllm', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


# -- typed options ---------------------------------------------------------------------------------
def test_model_args_are_coerced_to_the_option_types(fake_vllm):
    choice = choose_backend(
        "vllm:org/model",
        args={
            "tensor-parallel-size": "2",  # '-' reads as '_'
            "gpu_memory_utilization": "0.55",
            "max_model_len": "none",
            "dtype": "bf16",
            "enforce_eager": "yes",
        },
    )
    assert choice.options == VLLMOptions(2, 0.55, None, "bf16", True)
    assert choice.args == {
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.55,
        "max_model_len": None,
        "dtype": "bf16",
        "enforce_eager": True,
    }
    engine = choice.options.engine_args()
    assert engine["dtype"] == "bfloat16" and "max_model_len" not in engine
    hf = choose_backend(
        "a/b", args={"max_length": " 64 ", "stride": 16, "start_token": "<|начало|>"}
    )
    assert hf.options == HFOptions(max_length=64, stride=16, start_token="<|начало|>")
    api = choose_backend("m", api_base=API, args={"mode": "chat", "top_k": "0", "key_env": ""})
    assert api.options == OpenAIOptions(mode="chat", top_k=0, key_env=None)


@pytest.mark.parametrize(
    ("spec", "args", "pieces"),
    [
        ("a/b", {"tp": "2"}, ["backend 'hf'", "no option 'tp'", "device, dtype", "--model-arg"]),
        ("a/b", {"max_lenght": "9"}, ["did you mean 'max_length'", "--model-arg max_length="]),
        ("a/b", {"max_length": "2.5"}, ["option 'max_length'", "an integer or none", "2048"]),
        ("a/b", {"max_length": "1"}, ["option 'max_length'", ">= 2", "got 1"]),
        ("a/b", {"stride": "64", "max_length": "64"}, ["option 'stride'", "[1, max_length)"]),
        ("a/b", {"device": "gpu"}, ["option 'device'", "cuda:N", "got 'gpu'", "device=cuda:0"]),
        ("a/b", {"dtype": "бфлоат16"}, ["option 'dtype'", "'бфлоат16'", "dtype=bfloat16"]),
        ("a/b", {"größe": "1"}, ["no option 'größe'", "it takes"]),
        ("vllm:m", {"tensor_parallel_size": "two"}, ["backend 'vllm'", "an integer", "'two'"]),
        ("vllm:m", {"gpu_memory_utilization": "1.5"}, ["(0, 1]", "got 1.5", "=0.8"]),
        ("vllm:m", {"gpu_memory_utilization": "nan"}, ["a finite number", "'nan'"]),
        ("vllm:m", {"enforce_eager": "maybe"}, ["true or false", "enforce_eager=true"]),
        ("vllm:m", {"dtype": "int4"}, ["option 'dtype'", "bfloat16", "got 'int4'"]),
    ],
)
def test_a_wrong_key_or_value_names_provider_key_type_and_example(spec, args, pieces, fake_vllm):
    with pytest.raises(ConfigError) as err:
        choose_backend(spec, args=args)
    for piece in pieces:
        assert piece in str(err.value), (piece, str(err.value))


def test_api_option_errors_never_echo_a_pasted_key_and_long_values_are_cut():
    secret = "sk-" + "A" * 40
    with pytest.raises(ConfigError, match="key_env") as err:
        choose_backend("m", api_base=API, args={"key_env": secret})
    assert secret not in str(err.value) and "NAME of an environment variable" in str(err.value)
    with pytest.raises(ConfigError, match=r"option 'mode'.*\(5003 characters\)") as err:
        choose_backend("m", api_base=API, args={"mode": "x" * 5001})
    assert len(str(err.value)) < 400
    for args, match in [({"concurrency": "0"}, ">= 1"), ({"timeout": "-1"}, "> 0")]:
        with pytest.raises(ConfigError, match=match):
            choose_backend("m", api_base=API, args=args)


def test_shorthand_flags_feed_the_same_options_and_conflicts_are_refused(tmp_path):
    config = config_from_flags(
        model="a/b", data="d.jsonl", out=tmp_path, device="cpu", max_length=64
    )
    assert choose_backend("a/b", settings={"device": "cpu", "max_length": 64}).options == (
        resolve(config).choices["target"].options
    )
    assert resolve(config).choices["target"].options == HFOptions(device="cpu", max_length=64)
    with pytest.raises(ConfigError, match=r"'device' is given twice: by --device and by"):
        resolve(
            config_from_flags(
                model="a/b", data="d", out=tmp_path, device="cpu", model_args={"device": "cpu"}
            )
        )
    api = config_from_flags(model="m", data="d", out=tmp_path, api_base=API, api_mode="chat")
    assert resolve(api).choices["target"].options.mode == "chat"
    with pytest.raises(ConfigError, match=r"--max-length 64 has no effect.*'openai'"):
        resolve(config_from_flags(model="m", data="d", out=tmp_path, api_base=API, max_length=64))


def test_run_config_types_model_args_and_checks_reference_models(tmp_path, fake_vllm):
    plan = resolve(RunConfig(model="a/b", data="d", out=tmp_path, model_args={"max-length": "128"}))
    assert plan.choices["target"].args == {"max_length": 128}
    assert plan.target_access == "gray-box"
    vllm = resolve(config_from_flags(model="vllm:org/m", data="d", out=tmp_path, dtype="float16"))
    assert vllm.target_access == "token-logprobs"  # prompt log-probs, no vocabulary stats
    assert vllm.choices["target"].options.dtype == "float16"  # --dtype feeds vLLM too
    with pytest.raises(ConfigError, match=r"reference model small='vllm:org/r'.*no log-prob"):
        resolve(RunConfig(model="a/b", data="d", out=tmp_path, refs=(("small", "vllm:org/r"),)))


# -- runs through the registry -----------------------------------------------------------------
def test_a_run_through_the_registry_records_provider_and_options(tiny_model_dir, tmp_path):
    """--model-arg and the shorthand reach the same typed option, the backend uses it, the
    manifest records it, and both runs score identically (same fingerprint, same cache)."""
    base = {
        "model": str(tiny_model_dir),
        "data": "wikimia:32",
        "n_per_label": 8,
        "attacks": ("loss", "zlib"),
        "n_bootstrap": 50,
        "blind": False,
        "progress": False,
        "device": "cpu",
        "cache": tmp_path / "signals.sqlite",
    }
    by_arg = execute_run(
        config_from_flags(
            out=tmp_path / "a", model_args={"max_length": "16", "stride": "8"}, **base
        )
    )
    by_flag = execute_run(
        config_from_flags(out=tmp_path / "b", max_length=16, model_args={"stride": 8}, **base)
    )
    written = json.loads((tmp_path / "a" / "manifest.json").read_text())
    entry = written["models"]["target"]
    assert entry["provider"] == "hf" and entry["model"] == str(tiny_model_dir)
    assert entry["options"] == {
        "device": "cpu",
        "dtype": "auto",
        "max_length": 16,
        "stride": 8,
        "start_token": "auto",
    }
    assert entry["max_length"] == 16 and entry["stride"] == 8  # what the backend really used
    assert set(entry["capabilities"]) == {"gradients", "logprobs", "sampling"}
    # the config records what was asked, as given; the typed values are the model's options
    assert written["config"]["model_args"] == {"max_length": "16", "stride": "8"}
    assert by_flag.manifest["models"]["target"]["options"] == entry["options"]
    # same fingerprint: the second run is served whole from the first run's cache
    passes = by_flag.manifest["requests"]["target"]["logprobs"]
    assert passes["cache_hits"] == passes["requests"] > 0 and passes["executed"] == 0
    for column in ("loss", "zlib"):
        np.testing.assert_array_equal(by_arg.scores[column], by_flag.scores[column])


def test_imprint_run_reaches_vllm_with_typed_engine_options(fake_vllm, tiny_model_dir, tmp_path):
    data = _texts(tmp_path / "texts.jsonl")
    args = ["run", "--model", f"vllm:{tiny_model_dir}", "--data", str(data)]
    args += ["--model-arg", "tensor_parallel_size=2", "--model-arg", "gpu-memory-utilization=0.5"]
    args += ["--dtype", "bf16", "--attacks", "samia", "--param", "samia.n_samples=3"]
    args += ["--bootstrap", "50", "--no-blind", "--out", str(tmp_path / "run")]
    args += ["--cache", str(tmp_path / "c.sqlite")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    (llm,) = fake_vllm.made
    assert llm.kwargs == {
        "model": str(Path(tiny_model_dir).resolve()),
        "enable_prefix_caching": True,
        "tensor_parallel_size": 2,
        "gpu_memory_utilization": 0.5,
        "dtype": "bfloat16",
        "enforce_eager": False,
    }
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    entry = manifest["models"]["target"]
    assert entry["provider"] == "vllm"
    assert entry["capabilities"] == ["sampling", "token_logprobs"]
    assert entry["options"]["tensor_parallel_size"] == 2 and entry["usage"]["samples"] > 0
    # the config records the --model-arg values as given; typed above, in the model's options
    assert manifest["config"]["model_args"] == {
        "tensor_parallel_size": "2",
        "gpu-memory-utilization": "0.5",
    }
    assert entry["options"]["gpu_memory_utilization"] == 0.5
    import pyarrow.parquet as pq

    scores = pq.read_table(tmp_path / "run" / "scores.parquet").to_pydict()
    assert np.isfinite(scores["samia"]).all() and len(scores["samia"]) == 12


def test_imprint_run_vllm_without_vllm_names_the_extra_before_any_work(no_vllm, tmp_path):
    data = _texts(tmp_path / "texts.jsonl")
    out = tmp_path / "run"
    args = ["run", "--model", "vllm:x", "--data", str(data), "--out", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "llm-imprint[vllm]" in " ".join(result.output.split())
    assert not out.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model-arg", "dtype"], "use KEY=VALUE"),
        (["--model-arg", "=3"], "use KEY=VALUE"),
        (["--model-arg", "stride=1", "--model-arg", "stride=2"], "given twice"),
        (["--model-arg", "stride=x"], "option 'stride'"),
    ],
)
def test_imprint_run_model_arg_errors(extra, message, tmp_path):
    data = _texts(tmp_path / "texts.jsonl")
    args = ["run", "--model", "a/b", "--data", str(data), "--out", str(tmp_path / "r"), *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())


# -- no process-wide side effects ------------------------------------------------------------------
def _record_gqa_switch(monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """The value of the attention switch each time transformers asks whether to use GQA."""
    import transformers.integrations.sdpa_attention as sdpa

    seen: list[str | None] = []
    original = sdpa.use_gqa_in_sdpa
    monkeypatch.setattr(
        sdpa,
        "use_gqa_in_sdpa",
        lambda *a, **k: seen.append(os.environ.get(SDPA_GQA_ENV)) or original(*a, **k),
    )
    return seen


def test_loading_and_scoring_leave_environment_and_csv_limit_unchanged(
    tiny_model_dir, tmp_path, monkeypatch
):
    """Shared K/V heads are still on during forwards (transformers reads the variable per call),
    yet after loading, scoring and reading a CSV with a 300k-character field the environment and
    the csv module's limit are as they were."""
    from imprint.data import load_file

    monkeypatch.delenv(SDPA_GQA_ENV, raising=False)
    seen = _record_gqa_switch(monkeypatch)
    environ, limit = dict(os.environ), csv.field_size_limit()
    backend = choose_backend(str(tiny_model_dir), args={"device": "cpu"}).load()
    long_text = "Длинный документ 長い文書 " * 12_000  # > csv's default 131,072 characters
    path = tmp_path / "long.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([["text", "label"], [long_text, 1], ["short one", 0]])
    loaded = load_file(path)
    backend.score([ScoreRequest("hello world"), ScoreRequest("мир", prefix="Привет")])
    assert loaded.samples[0].text == long_text
    assert seen and set(seen) == {"1"}  # the tiny model has 2 K/V heads for 4 query heads
    assert dict(os.environ) == environ and csv.field_size_limit() == limit


def test_a_users_own_setting_of_the_attention_switch_is_respected(tiny_model_dir, monkeypatch):
    monkeypatch.setenv(SDPA_GQA_ENV, "0")
    seen = _record_gqa_switch(monkeypatch)
    backend = choose_backend(str(tiny_model_dir), args={"device": "cpu"}).load()
    backend.score([ScoreRequest("hello world")])
    assert seen and set(seen) == {"0"} and os.environ[SDPA_GQA_ENV] == "0"


def test_game_sampling_and_lora_init_are_seeded_without_touching_the_global_rng(tiny_model_dir):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from imprint.game.config import GameConfig
    from imprint.game.texts import _sample_batch
    from imprint.game.train import prepare_model

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    torch.manual_seed(123)
    state = torch.random.get_rng_state()
    kwargs = {"seed": 7, "max_new_tokens": 6, "temperature": 1.0, "top_k": 0}
    first = _sample_batch(model, tokenizer, ["The council", "Учёные"], **kwargs)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert _sample_batch(model, tokenizer, ["The council", "Учёные"], **kwargs) == first
    config = GameConfig(model=str(tiny_model_dir), method="lora", lora_targets=("q_proj",))
    loras = [
        prepare_model(AutoModelForCausalLM.from_pretrained(tiny_model_dir), config, "tiny")
        for _ in range(2)
    ]
    assert torch.equal(torch.random.get_rng_state(), state)
    weights = [
        {k: v for k, v in m.state_dict().items() if "lora_A" in k} for m in loras
    ]  # LoRA's A is drawn at random (B starts at zero)
    assert weights[0] and all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_provider_for_matches_choose_backend_without_building_options():
    provider, target = provider_for("gguf:/x.gguf")
    assert (provider.name, target) == ("gguf", "gguf:/x.gguf")
    assert provider_for("anything", api_base=API)[0].name == "openai"


def test_imprint_backends_lists_schemes_capabilities_and_options():
    result = CliRunner().invoke(app, ["backends"], env={"COLUMNS": "400"})  # unwrapped
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    vllm = next(i for i, line in enumerate(lines) if line.startswith("vllm:"))
    assert "sampling,token_logprobs" in lines[vllm] and " logprobs" not in lines[vllm]
    assert "tensor_parallel_size" in lines[vllm + 1] and "enforce_eager" in lines[vllm + 1]
    assert any(line.startswith("game:") and "served by hf" in line for line in lines)
