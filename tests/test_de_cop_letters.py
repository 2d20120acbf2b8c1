"""DE-COP's decision rule (issue 19, item 3): for a model with logits, the authors' argmax over the
A-D letters' next-token probabilities (one forward pass per question, no generation, every
question answered); generated answers parsed to a letter for text-only targets; the rule a run
used is recorded in the manifest."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from fake_openai_server import FakeOpenAIServer
from test_attacks_blackbox_new import ENV, KEY, MEMBERS, NON_MEMBERS, api, run_de_cop, scripted

from imprint.attacks.de_cop import DECOP, decop_scores, letter_choice, question_prompt
from imprint.backends.hf import HFLogprobBackend
from imprint.backends.text import prompt_ids
from imprint.cli.flags import config_from_flags
from imprint.errors import CapabilityError, ConfigError
from imprint.requests.client import in_memory_requests
from imprint.requests.letter_choice import letter_logprobs, letter_token_ids
from imprint.run import RunConfig, execute_run

pytestmark = pytest.mark.usefixtures("one_torch_thread")

TEXTS = [
    "Old maps of the harbour show three piers and a lighthouse on the northern rocks.",
    "A small boat drifted slowly down the wide grey river before dawn.",
]
PARAS = [[f"{t} (version {k})" for k in range(3)] for t in TEXTS]


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(ENV, KEY)


@pytest.fixture(scope="module")
def tiny(tiny_model_dir) -> HFLogprobBackend:
    return HFLogprobBackend(str(tiny_model_dir), device="cpu")


def test_letter_rule_on_hand_made_logits():
    # vocabulary of 6; A = token 1, B = tokens 2 and 4 (two spellings), C = 3, D = 5
    logits = np.array([0.0, 1.0, 2.0, 0.5, 1.5, -1.0])
    ids = [(1,), (2, 4), (3,), (5,)]
    p = np.exp(logits) / np.exp(logits).sum()  # softmax over the whole vocabulary, by hand
    expected = np.log([p[1], p[2] + p[4], p[3], p[5]])
    per_letter, mass = letter_logprobs(logits, ids)
    np.testing.assert_allclose(per_letter, expected, rtol=1e-12)
    assert mass == pytest.approx(1 - p[0])
    assert letter_choice(per_letter) == 1  # B: 2 and 4 together outweigh everything else
    # one spelling only: C's single token beats A's, B's token 2 alone is the largest
    assert letter_choice(letter_logprobs(logits, [(1,), (2,), (3,), (5,)])[0]) == 1
    assert letter_choice([-2.0, -1.0, -1.0, -3.0]) == 1  # ties: the first, as torch.argmax
    # every question gets a letter: the score is picked / asked with nothing unparsed
    picks = [letter_choice(v) for v in ([0, -1, -2, -3], [-3, -2, -1, 0], [-1, 0, -2, -3])]
    assert decop_scores(picks, [0, 3, 2]) == (2 / 3, 2 / 3)


def test_letter_tokens_are_single_token_spellings(tiny):
    ids = letter_token_ids(tiny, "ABCD")
    for letter, found in zip("ABCD", ids, strict=True):
        assert found and all(tiny.tokenizer.decode([t]).strip() == letter for t in found), letter

    class NoLetters:
        def encode(self, text):
            return [7, 8] if "A" in text else [3]

    with pytest.raises(ConfigError, match="no single token for the option letter 'A'"):
        letter_token_ids(NoLetters(), "AB")


def test_tiny_model_answers_every_question_by_its_letter_logits(tiny):
    requests = in_memory_requests(tiny)
    out = DECOP(n_orderings=4).score_with_requests(requests, TEXTS, paraphrases=PARAS)
    kinds = requests.runner.counts.to_dict()["target"]
    assert "multiple_choice" not in kinds  # nothing generated
    assert kinds["letter_logprobs"]["executed"] == 4 * len(TEXTS)
    np.testing.assert_array_equal(out["de_cop"], out["de_cop_parsed"])  # all answered
    # the same answers from the model's full logits (one unpadded forward each), by hand
    spell = []
    for c in "ABCD":
        forms = [tiny.tokenizer(f, add_special_tokens=False)["input_ids"] for f in (c, " " + c)]
        spell.append(sorted({f[0] for f in forms if len(f) == 1}))
    attack = DECOP(n_orderings=4)
    for i, text in enumerate(TEXTS):
        four = (" ".join(text.split()), *(" ".join(p.split()) for p in PARAS[i]))
        right = 0
        for order in attack.orderings():
            prompt = question_prompt(tuple(four[k] for k in order))
            ids = torch.tensor([prompt_ids(tiny, prompt, "answer")])
            with torch.no_grad():
                probs = torch.softmax(tiny.model(input_ids=ids).logits[0, -1].double(), -1)
            per_letter = [float(probs[s].sum()) for s in spell]
            right += int(np.argmax(per_letter)) == order.index(0)
        assert out["de_cop"][i] == pytest.approx(right / 4)


def test_tiny_model_run_records_the_rule_and_reruns_from_the_store(tiny_model_dir, tmp_path):
    rows = [
        {"text": t, "label": k % 2, "paras": [f"{t} (v{j})" for j in range(3)]}
        for k, t in enumerate([*TEXTS, *MEMBERS, *NON_MEMBERS])
    ]
    data = tmp_path / "texts.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")

    def config(out: str) -> RunConfig:
        return config_from_flags(
            model=str(tiny_model_dir),
            data=str(data),
            out=tmp_path / out,
            attacks=("de_cop",),
            params={"de_cop": {"n_orderings": 3, "paraphrase_fields": ("paras",)}},
            device="cpu",
            n_bootstrap=10,
            blind=False,
            cache=tmp_path / "cache.sqlite",
            progress=False,
        )

    first = execute_run(config("run1"))
    recorded = first.manifest["attacks"]["de_cop"]
    assert (recorded["decision"], recorded["decision_rule"]) == ("auto", "letter_logits")
    kinds = first.manifest["requests"]["target"]
    assert kinds["letter_logprobs"]["executed"] == 3 * len(rows)
    assert "multiple_choice" not in kinds
    scores = first.scores
    assert np.isfinite(scores["de_cop"]).all()
    np.testing.assert_array_equal(scores["de_cop"], scores["de_cop_parsed"])
    second = execute_run(config("run2"))
    assert second.manifest["requests"]["target"]["letter_logprobs"]["executed"] == 0
    np.testing.assert_array_equal(second.scores["de_cop"], scores["de_cop"])
    written = json.loads((tmp_path / "run1" / "manifest.json").read_text("utf-8"))
    assert written["attacks"]["de_cop"]["decision_rule"] == "letter_logits"
    assert "de_cop" in written["attack_deviations"]


def test_parse_rule_can_still_be_asked_of_a_local_model(tiny):
    requests = in_memory_requests(tiny)
    attack = DECOP(n_orderings=2, decision="parse", answer_max_tokens=2)
    out = attack.score_with_requests(requests, TEXTS, paraphrases=PARAS)
    kinds = requests.runner.counts.to_dict()["target"]
    assert kinds["multiple_choice"]["executed"] == 2 * len(TEXTS)
    assert "letter_logprobs" not in kinds
    assert all(math.isnan(v) or 0 <= v <= 1 for v in out["de_cop"])


def test_api_targets_keep_the_parsing_rule_and_record_it(tmp_path):
    texts = [*MEMBERS, *NON_MEMBERS]
    rows = [
        {"text": t, "label": int(t in MEMBERS), "paras": [f"{t} (v{k})" for k in range(3)]}
        for t in texts
    ]
    data = tmp_path / "texts.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    with FakeOpenAIServer(scripted, api_key=KEY, models=("scripted",)) as server:
        with api(server, "completions") as backend:
            with pytest.raises(CapabilityError, match="decision=parse"):
                DECOP(decision="letter_logits").check_backend(backend)
            direct = DECOP().score_with_backend(
                backend, texts, paraphrases=[r["paras"] for r in rows]
            )
        result = run_de_cop(server, data, tmp_path, n_bootstrap=10)
    # the scripted model: members always right, "always A" right 6 of 24, "unsure" never answers
    np.testing.assert_allclose(direct["de_cop"], [1, 1, 6 / 24, 0])
    assert math.isnan(direct["de_cop_parsed"][3])
    assert result.manifest["attacks"]["de_cop"]["decision_rule"] == "parse"
    kinds = result.manifest["requests"]["target"]
    assert kinds["multiple_choice"]["executed"] == 24 * 4 and "letter_logprobs" not in kinds


def test_decision_is_validated():
    from imprint.attacks.params import check_params

    with pytest.raises(ConfigError, match="decision must be one of"):
        DECOP(decision="logits")
    with pytest.raises(ConfigError, match="de_cop.decision=auto"):  # --param, before any work
        check_params({"de_cop": {"decision": "logits"}})
