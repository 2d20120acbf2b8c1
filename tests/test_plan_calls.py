"""Issue 24, the plan line: model calls BY KIND (log-prob passes, sampling, embeddings, ...)
counted before the work, with a time from this machine's measured throughput where one exists,
said again at the end with what each kind took; an HTTP target's request lines under it."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import torch
from fake_openai_server import FakeOpenAIServer
from rich.console import Console
from typer.testing import CliRunner

from imprint.backends.base import SamplingSettings
from imprint.backends.hf import HFLogprobBackend
from imprint.backends.text import HFTextBackend
from imprint.cli import app
from imprint.cli.flags import config_from_flags
from imprint.run import execute_run

KEY_ENV = "IMPRINT_TEST_PLAN_KEY"


def _data(tmp_path: Path, n: int = 16) -> Path:
    path = tmp_path / "texts.jsonl"
    rows = [{"text": f"A short text number {i} about the Town {i * 7} and its river",
             "label": i % 2} for i in range(n)]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _line(output: str, start: str) -> str:
    return next(line for line in output.splitlines() if line.startswith(start))


def _planned(manifest: dict) -> dict[tuple[str, str], int]:
    return {(c["role"], c["kind"]): c["count"] for c in manifest["plan"]["calls"]}


def _executed(manifest: dict) -> dict[tuple[str, str], int]:
    return {(role, kind): c["executed"] for role, kinds in manifest["requests"].items()
            for kind, c in kinds.items()}  # fmt: skip


def test_the_plan_counts_sampling_and_embedding_calls_the_run_then_executes(
    tiny_model_dir, tmp_path
):
    data = _data(tmp_path)
    args = ["run", "--model", str(tiny_model_dir), "--data", str(data),
            "--attacks", "loss,samia,qmia", "--param", "samia.n_samples=1",
            "--param", "qmia.n_train=4", "--param", "qmia.texts_per_parameter=2",
            "--shot-holdout", "4", "--bootstrap", "20",
            "--no-blind", "--cache", str(tmp_path / "store.sqlite")]  # fmt: skip
    first = CliRunner().invoke(app, [*args, "--param", "samia.max_tokens=2", "--out",
                                     str(tmp_path / "r1")])  # fmt: skip
    assert first.exit_code == 0, first.output
    plan = _line(first.output, "plan: ")
    # 12 texts evaluated (4 non-members held out): one sample request per text, one embedding
    # per evaluated and per training text, one pass per evaluated and per training text
    assert "12 texts (8 members, 4 non-members) x 3 attacks (loss, samia, qmia)" in plan
    assert "target logprobs 16 passes" in plan
    assert "target sample 12 requests (not estimated: no sample timing on this machine" in plan
    assert "embedder embed 16 requests (not estimated: no embed timing" in plan
    manifest = json.loads((tmp_path / "r1" / "manifest.json").read_text())
    assert _planned(manifest) == _executed(manifest)  # what was planned is what ran
    assert set(_planned(manifest)) == {("target", "logprobs"), ("target", "sample"),
                                       ("embedder", "embed")}  # fmt: skip
    assert manifest["plan"]["seconds"]["target sample"] > 0
    done = _line(first.output, "done: ")
    assert "target sample 12 requests executed in" in done and "(planned 12" in done
    assert first.output.index("plan: ") < first.output.index("done: ")

    # the next run on this machine estimates each kind from what the first one measured; a new
    # token budget makes new sample requests, the passes and embeddings come from the store
    second = CliRunner().invoke(app, [*args, "--param", "samia.max_tokens=3", "--out",
                                      str(tmp_path / "r2")])  # fmt: skip
    assert second.exit_code == 0, second.output
    plan = _line(second.output, "plan: ")
    assert "target sample 12 requests (about" in plan and "per request, measured by the run" in plan
    assert "embedder embed 16 requests (all in the store)" in plan  # no work, no estimate needed
    assert "target logprobs 16 passes (~" in plan and "tokens, all in the store)" in plan
    assert "measured now" not in plan  # the store answers every pass: no timing forward either
    done = _line(second.output, "done: ")
    assert "target sample 12 requests executed" in done
    assert "embedder embed 0 requests executed, 16 answered by the store" in done


@pytest.fixture(scope="module")
def generate(tiny_model_dir):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    text = HFTextBackend(HFLogprobBackend(str(tiny_model_dir), device="cpu"))

    def run(prompt, n, max_tokens, stop, seed, temperature):
        return text.sample(
            [prompt], SamplingSettings(n, max_tokens, stop, seed=seed, temperature=temperature)
        )[0]

    yield run
    torch.set_num_threads(threads)


def test_an_http_target_gets_its_request_lines_under_the_plan(generate, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-plan-test")
    out = io.StringIO()
    with FakeOpenAIServer(generate, api_key="sk-plan-test") as server:
        config = config_from_flags(
            model="tiny", data=str(_data(tmp_path, 8)), out=tmp_path / "r", attacks=("samia",),
            params={"samia": {"n_samples": 3, "max_tokens": 2}}, api_base=server.base_url,
            api_key_env=KEY_ENV, n_bootstrap=20, blind=False, progress=False,
            cache=tmp_path / "store.sqlite",
        )  # fmt: skip
        result = execute_run(config, console=Console(file=out, width=2000))
    lines = out.getvalue().splitlines()
    plan = next(i for i, line in enumerate(lines) if line.startswith("plan: "))
    assert "target sample 8 requests" in lines[plan]
    http = lines[plan + 1]
    assert http.startswith(f"HTTP requests to target at {server.base_url}: samia 8; ")
    assert "if it returns one choice per request" in http  # 8 x 3 when the server caps n at 1
    assert _planned(result.manifest) == _executed(result.manifest)
    assert list(result.manifest["plan"]["http"]) == [http]


def test_the_plan_counts_the_passes_and_calls_of_every_local_attack_it_can_before_the_work(
    tiny_model_dir, tmp_path
):
    # ACMIA's tempered passes (a role per temperature) and DE-COP's paraphrases were "its model
    # calls", uncounted; CAMIA's reference texts repeated, QMIA's training texts and SaMIA's
    # prefixes (defaults) are counted beside them. Only DE-COP's questions wait for the answers.
    args = ["run", "--model", str(tiny_model_dir), "--data", str(_data(tmp_path, 24)),
            "--attacks", "loss,samia,camia,qmia,acmia,de_cop", "--shot-holdout", "4",
            "--param", "camia.n_reference=4", "--param", "qmia.n_train=4",
            "--param", "qmia.texts_per_parameter=2",
            "--param", "de_cop.paraphrase_max_tokens=2", "--bootstrap", "20", "--no-blind",
            "--cache", str(tmp_path / "store.sqlite"), "--out", str(tmp_path / "r")]  # fmt: skip
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["plan"]["uncounted"] == {
        "de_cop": ["letter_logprobs (asked of the texts with usable paraphrases)"]
    }
    executed = _executed(manifest)
    assert executed.pop(("target", "letter_logprobs")) > 0  # the one kind named uncounted
    assert _planned(manifest) == executed
    # 20 evaluated texts: their pass and two repeats, CAMIA's 4 references likewise (QMIA trains
    # on the same 4), the pass at each of ACMIA's two temperatures, 3 paraphrases per text
    assert executed[("target", "logprobs")] == 3 * 20 + 3 * 4
    assert executed[("target@t=0.5", "logprobs")] == executed[("target@t=2", "logprobs")] == 20
    # a tempered role's tokens are counted with the target's tokenizer, not as words x 1.3
    tokens = {c["role"]: c["tokens"] for c in manifest["plan"]["calls"] if c["kind"] == "logprobs"}
    encode = HFLogprobBackend(str(tiny_model_dir), device="cpu").encode
    lines = (tmp_path / "texts.jsonl").read_text().splitlines()
    rows = [json.loads(line)["text"] for line in lines]
    counts = sorted(len(encode(text)) for text in rows)  # 20 of these 24 texts are evaluated
    low, high = sum(counts[:20]), sum(counts[-20:])
    assert not low <= int(20 * 11 * 1.3) <= high  # the old estimate is outside the range
    assert tokens["target@t=0.5"] == tokens["target@t=2"] and low <= tokens["target@t=2"] <= high
    assert executed[("target", "paraphrase")] == 3 * 20
    assert executed[("target", "sample")] == 20 and executed[("embedder", "embed")] == 24
    # a rerun on the same store: the tempered roles' passes are found there too (they were
    # never checked, so the plan called them work to do)
    rerun = CliRunner().invoke(app, [*args[:-1], str(tmp_path / "r2")])
    assert rerun.exit_code == 0, rerun.output
    plan = _line(rerun.output, "plan: ")
    for role in ("target@t=0.5", "target@t=2"):
        assert f"{role} logprobs 20 passes (~" in plan
        assert plan.split(f"{role} logprobs 20 passes")[1].split(")")[0].endswith("in the store")
