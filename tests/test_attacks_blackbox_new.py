"""The n-gram coverage attack (Hallinan et al. 2025) and DE-COP (Duarte et al. 2024): formulas on
hand-made generations and answers, the tiny model end to end (library and `imprint run`, rerun
from the store), and a real loopback OpenAI-compatible server (completions and chat) answered by
a scripted "model" that has memorised the members, so the expected scores are known exactly."""

from __future__ import annotations

import json
import logging
import re
from itertools import permutations
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from fake_openai_server import FakeOpenAIServer

from imprint.attacks import build_attacks
from imprint.attacks.base import RunContext
from imprint.attacks.de_cop import (
    DECOP,
    ORDERINGS,
    clean_paraphrase,
    decop_scores,
    display,
    parse_choice,
    question_prompt,
    usable_paraphrases,
)
from imprint.attacks.ngram_coverage import (
    NGramCoverage,
    coverage,
    coverage_words,
    creativity,
    match_ends,
    split_prefix_suffix,
)
from imprint.backends.base import SamplingSettings
from imprint.backends.hf import HFLogprobBackend
from imprint.backends.http import OpenAICompatibleBackend, RetryPolicy
from imprint.cli.flags import config_from_flags
from imprint.data.sample import Sample
from imprint.errors import ConfigError, DataError
from imprint.run import RunConfig, execute_run

KEY = "sk-test-blackbox-new"
ENV = "IMPRINT_TEST_BLACKBOX_NEW_KEY"


def run_de_cop(server: FakeOpenAIServer, data: Path, tmp_path: Path, n_bootstrap: int) -> Any:
    """``imprint run`` of DE-COP on the server's model ``scripted``, paraphrases read from each
    row's ``paras`` field; output in ``tmp_path/run``."""
    return execute_run(
        config_from_flags(
            model="scripted",
            data=str(data),
            out=tmp_path / "run",
            attacks=("de_cop",),
            params={"de_cop": {"paraphrase_fields": ("paras",)}},
            api_base=server.base_url,
            api_key_env=ENV,
            n_bootstrap=n_bootstrap,
            blind=False,
            cache=tmp_path / "cache.sqlite",
            progress=False,
        )
    )


FAST = RetryPolicy(max_retries=4, base_s=0.01, cap_s=0.05)
MULTILINGUAL = [
    "The quick brown fox jumps over the lazy dog near the old river bank.",
    "北京是中华人民共和国的首都，也是全国的政治和文化中心。",
    "Москва — столица России и крупнейший по численности населения город страны.",
    "القاهرة هي عاصمة جمهورية مصر العربية وأكبر مدنها من حيث عدد السكان.",
]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# -- n-gram coverage: formulas ---------------------------------------------------------------


def brute_match_ends(gen: list[str], ref: list[str]) -> list[int]:
    """The longest run of ``gen`` ending at each word that occurs contiguously in ``ref``."""
    out = []
    for t in range(len(gen)):
        best = 0
        for k in range(1, t + 2):
            run = gen[t - k + 1 : t + 1]
            if any(ref[j : j + k] == run for j in range(len(ref) - k + 1)):
                best = k
        out.append(best)
    return out


def brute_coverage(gen: list[str], ref: list[str], min_n: int) -> float:
    """Words of ``gen`` inside some n-gram (n >= min_n) of gen that occurs in ``ref``."""
    covered = set()
    for i in range(len(gen)):
        for j in range(i + min_n, len(gen) + 1):
            run = gen[i:j]
            if any(ref[s : s + len(run)] == run for s in range(len(ref) - len(run) + 1)):
                covered.update(range(i, j))
    return len(covered) / len(gen) if gen else 0.0


def test_match_ends_and_coverage_against_brute_force():
    rng = np.random.default_rng(0)
    vocab = ["a", "b", "c", "d", "京", "е"]
    for _ in range(200):
        gen = [vocab[i] for i in rng.integers(0, len(vocab), rng.integers(0, 12))]
        ref = [vocab[i] for i in rng.integers(0, len(vocab), rng.integers(0, 12))]
        assert match_ends(gen, ref).tolist() == brute_match_ends(gen, ref)
        for n in (1, 2, 3, 5):
            assert coverage(gen, ref, n) == pytest.approx(brute_coverage(gen, ref, n))


def test_coverage_and_creativity_by_hand():
    gen = coverage_words("the cat sat on the mat today")  # 7 words
    ref = coverage_words("a cat sat on the mat and the dog")  # 9 words
    # "cat sat on the mat" (5 words) is the only run of >= 2 words found in ref
    assert match_ends(gen, ref).tolist() == [1, 1, 2, 3, 4, 5, 0]
    assert coverage(gen, ref, 3) == pytest.approx(5 / 7)
    assert coverage(gen, ref, 6) == 0.0
    assert coverage(gen, ref, 1) == pytest.approx(6 / 7)  # "today" is not in ref
    # n = 2..5 each cover 5 of 7 words, n = 6..12 none
    assert creativity(gen, ref, 2, 12) == pytest.approx(4 * 5 / 7)
    # normalised by max(|g|, |s|) = 9, or by (7 + 9) / 2 = 8
    assert coverage(gen, ref, 3, normalise="reference") == pytest.approx(5 / 9)
    assert coverage(gen, ref, 3, normalise="both") == pytest.approx(5 / 8)
    assert coverage([], ref, 3) == 0.0 and creativity([], ref, 2, 12) == 0.0


def test_words_are_unicode_aware_and_case_kept():
    assert coverage_words("北京是首都。") == ["北", "京", "是", "首", "都", "。"]
    assert coverage_words("Москва — столица") == ["Москва", "—", "столица"]
    assert coverage_words("القاهرة هي عاصمة") == ["القاهرة", "هي", "عاصمة"]
    assert coverage_words("ＡＢＣ Dog") == ["ABC", "Dog"]  # NFKC folds full-width letters
    # whole words only: "cat" is not inside "catalog" (the reference's substring match would be)
    assert coverage(["the", "cat", "is"], ["the", "catalog", "is"], 2) == 0.0
    # case kept, as the reference code
    assert coverage(["The", "cat", "sat"], ["the", "cat", "sat"], 3) == 0.0


def test_prefix_split_keeps_both_sides_and_refuses_single_units():
    assert split_prefix_suffix("one two three four", 0.5) == ("one two", "three four")
    assert split_prefix_suffix("北京是中国的首都", 0.5) == ("北京是中", "国的首都")
    assert split_prefix_suffix("one two", 0.99) == ("one", "two")  # suffix never empty
    assert split_prefix_suffix("one two three", 0.01) == ("one", "two three")
    assert split_prefix_suffix("Hi", 0.5) is None and split_prefix_suffix("  ", 0.5) is None


def test_text_scores_aggregate_max_and_mean():
    suffix = "sat on the mat and slept"  # 6 words
    gens = ["sat on the mat", "a dog on the mat ran", "nothing here at all"]
    # coverage_3: 4/4 = 1; "on the mat" = 3 of 6 words = 0.5; 0
    assert NGramCoverage().text_scores(gens, suffix)[0] == pytest.approx(1.0)
    mean = NGramCoverage(aggregate="mean").text_scores(gens, suffix)
    assert mean[0] == pytest.approx((1 + 0.5 + 0) / 3)
    # creativity 2..12: g1 covers 4/4 for n = 2, 3, 4; g2 covers 3/6 for n = 2, 3; g3 nothing
    assert mean[1] == pytest.approx((3 * 1 + 2 * 0.5 + 0) / 3)
    # emoji are words here (as the reference's casual tokenizer makes them): 2 of 3 covered
    assert NGramCoverage(min_ngram=2).text_scores(["🙂🙂 x"], "a 🙂🙂")[0] == pytest.approx(2 / 3)
    assert all(np.isnan(NGramCoverage().text_scores(gens, "   ")))


def test_ngram_parameters_are_validated():
    for bad in (
        {"n_samples": 0},
        {"prefix_ratio": 0.0},
        {"min_ngram": 0},
        {"creativity_min": 5, "creativity_max": 4},
        {"max_tokens": -1},
    ):
        with pytest.raises(ConfigError, match="ngram_coverage"):
            NGramCoverage(**bad)
    with pytest.raises(ConfigError, match="aggregate"):
        build_attacks(["ngram_coverage"], params={"ngram_coverage": {"aggregate": "median"}})


# -- DE-COP: formulas --------------------------------------------------------------------------


OPTIONS = (
    "The quick brown fox jumps over the lazy dog near the bank",
    "A swift brown fox leaps over a lazy dog by the bank",
    "Over the lazy dog a quick brown fox jumps",
    "Near the river bank, the dog was jumped over by a fox",
)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("B", 1),
        (" C.", 2),
        ("(D)", 3),
        ("**A**", 0),
        ("Answer: B", 1),
        ("The answer is C.", 2),
        ("The correct answer is: D)", 3),
        ("C is the verbatim passage", 2),
        ("b", 1),
        ("Ｂ", 1),  # full-width, NFKC
        ("I would pick option D here", 3),
        ("Between them, (B) is right", 1),
        ("A swift brown fox leaps over a lazy dog", 1),  # quotes option B's text
        ("A or B", None),  # two letters: ambiguous
        ("A passage about a fox", None),  # the article, not a letter
        ("I am not sure.", None),
        ("", None),
        ("d'accord", None),
    ],
)
def test_parse_choice(answer, expected):
    assert parse_choice(answer, OPTIONS) == expected


def test_decop_scores_by_hand():
    # 4 orderings, verbatim at A, B, C, D; answers: A (right), C (wrong), C (right), none
    assert decop_scores([0, 2, 2, None], [0, 1, 2, 3]) == pytest.approx((2 / 4, 2 / 3))
    picked, parsed = decop_scores([None, None], [0, 1])
    assert picked == 0.0 and np.isnan(parsed)
    with pytest.raises(ConfigError):
        decop_scores([0], [0, 1])


def test_orderings_are_all_24_balanced_or_a_seeded_subset():
    assert len(set(ORDERINGS)) == 24 == len(DECOP().orderings())
    positions = [o.index(0) for o in ORDERINGS]
    assert [positions.count(k) for k in range(4)] == [6, 6, 6, 6]  # verbatim 6 times at each
    subset = DECOP(n_orderings=5, seed=3).orderings()
    assert len(set(subset)) == 5 and set(subset) <= set(permutations(range(4)))
    assert subset == DECOP(n_orderings=5, seed=3).orderings()
    assert subset != DECOP(n_orderings=5, seed=4).orderings()


def test_question_prompt_and_paraphrase_checks():
    prompt = question_prompt(OPTIONS, "the book 'Foxes'")
    assert "verbatim from the book 'Foxes'?" in prompt and prompt.endswith("\nAnswer:")
    assert [line[:3] for line in prompt.splitlines()[4:8]] == ["A. ", "B. ", "C. ", "D. "]
    assert display("  a\n\tb  c ") == "a b c"
    assert display("ＡＢ　ﬁ") == "ＡＢ ﬁ"  # characters as written (a model saw them so)


def test_generated_paraphrases_lose_their_wrapping():
    one = "One paragraph only."
    assert clean_paraphrase("Here is the rewritten passage:\n“Just one.”", one) == "Just one."
    assert clean_paraphrase("Only one.\n\nPassage: and the model wrote on", one) == "Only one."
    two = "First paragraph.\n\nSecond paragraph."
    assert clean_paraphrase("First, rewritten.\n\nSecond, rewritten.", two).endswith(
        "Second, rewritten."
    )
    assert clean_paraphrase("  'Quoted'  ", one) == "Quoted"
    assert clean_paraphrase("Note:", one) == "Note:"  # nothing after the announcement: kept
    text = "Москва —  столица\nРоссии."
    assert usable_paraphrases(text, ["x", "y", "z"]) == ("x", "y", "z")
    assert usable_paraphrases(text, ["x", "y"]) is None  # fewer than three
    assert usable_paraphrases(text, ["x", " ", "z"]) is None  # an empty one
    assert usable_paraphrases(text, ["x", "Москва — столица России.", "z"]) is None  # verbatim
    assert usable_paraphrases("", ["x", "y", "z"]) is None


def test_decop_reads_paraphrase_fields_and_refuses_missing_ones():
    samples = [
        Sample("a", "Text one here.", 1, {"para": ["p1", "p2", "p3"], "title": "Book A"}),
        Sample("b", "Text two here.", 0, {"para": ["q1", "q2", "q3"], "title": "Book B"}),
    ]
    prepared = DECOP(paraphrase_fields=("para",), source_field="title").prepare(samples, None)
    assert prepared.attack.given["Text two here."] == (("q1", "q2", "q3"), "Book B")
    three = [Sample("c", "T.", 1, {"x": "1", "y": "2", "z": "3"})]
    attack = DECOP(paraphrase_fields=("x", "y", "z")).prepare(three, None).attack
    assert attack.given["T."][0] == ("1", "2", "3")
    with pytest.raises(DataError, match="'b'.*'para'"):
        DECOP(paraphrase_fields=("para",)).prepare([samples[0], Sample("b", "t", 0, {})], None)
    with pytest.raises(DataError, match="3 texts"):
        DECOP(paraphrase_fields=("title",)).prepare(samples, None)
    for bad in ({"n_orderings": 0}, {"n_orderings": 25}, {"paraphrase_fields": ("a", "b")}):
        with pytest.raises(ConfigError, match="de_cop"):
            DECOP(**bad)


# -- a scripted model behind a real HTTP server ------------------------------------------------

MEMBERS = {  # text -> the non-verbatim answer style of the scripted model
    "The quick brown fox jumps over the lazy dog near the old river bank.": "letter",
    "北京是中华人民共和国的首都，也是全国的政治和文化中心。": "chat",
}
NON_MEMBERS = {
    "Москва — столица России и крупнейший по численности населения город страны.": "always_a",
    "القاهرة هي عاصمة جمهورية مصر العربية وأكبر مدنها من حيث عدد السكان.": "unsure",
}
_OPTION = re.compile(r"^([A-D])\. (.*)$", re.M)


def scripted(prompt: str, n: int, max_tokens: int, stop, seed, temperature) -> list[str]:
    """A "model" that has memorised MEMBERS: it continues their prefixes with the true suffix
    and names the verbatim option of their questions; for non-members it writes a fixed
    continuation with one 3-word run of the suffix, and answers A or nothing useful."""
    if "Question: Which of the following passages" in prompt:
        options = dict(_OPTION.findall(prompt))
        for text in MEMBERS:
            for letter, shown in options.items():
                if shown == display(text):
                    return [f"The answer is {letter}."] * n
        shown = options.values()
        style = next((s for t, s in NON_MEMBERS.items() if display(t) in shown), "unsure")
        return ["A"] * n if style == "always_a" else ["I cannot tell which one."] * n
    if prompt.rstrip().endswith(("Rewritten passage:", "Restated passage:", "Paraphrase:")):
        passage = prompt.split("Passage: ", 1)[1].rsplit("\n\n", 1)[0]
        label = prompt.rstrip().rsplit("\n", 1)[-1]  # one of three instructions
        return [f"{label} {passage[::-1]}"] * n
    for text in [*MEMBERS, *NON_MEMBERS]:
        prefix, suffix = split_prefix_suffix(text, 0.5)
        if prompt == prefix:
            if text in MEMBERS:
                return [" " + suffix] * n
            words = coverage_words(suffix)
            return [" zz " + " ".join(words[:3]) + " qq"] * n  # 3 of 5 words copied
    return ["nothing"] * n


def api(server: FakeOpenAIServer, mode: str) -> OpenAICompatibleBackend:
    return OpenAICompatibleBackend(
        server.base_url, "scripted", api_key_env=ENV, mode=mode, retry=FAST, timeout_s=5
    )


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv(ENV, KEY)


@pytest.mark.parametrize("mode", ["completions", "chat"])
def test_both_attacks_over_http_give_the_hand_computed_scores(mode, caplog):
    texts = [*MEMBERS, *NON_MEMBERS]
    with FakeOpenAIServer(
        scripted, api_key=KEY, faults=["429", None, "500"], models=("scripted",)
    ) as server:
        with api(server, mode) as backend:
            ngram = NGramCoverage(n_samples=3).score_with_backend(backend, texts)
            caplog.set_level(logging.WARNING, logger="imprint.attacks.de_cop")
            decop = DECOP().score_with_backend(backend, texts)
            usage = backend.usage()
        paths = {entry["path"] for entry in server.log}
    assert paths == {f"/v1/{'chat/completions' if mode == 'chat' else 'completions'}"}
    assert usage["failed"] == 0 and sum(usage["retries"].values()) == 2
    # members: the generation is the suffix itself; non-members: 3 copied words of 5 generated
    np.testing.assert_allclose(ngram["ngram_coverage"], [1, 1, 3 / 5, 3 / 5])
    cre_members = [len(coverage_words(split_prefix_suffix(t, 0.5)[1])) - 1 for t in MEMBERS]
    # a member's generation covers all its words for every n up to its length (n >= 2)
    np.testing.assert_allclose(ngram["ngram_creativity"][:2], [min(c, 11) for c in cre_members])
    np.testing.assert_allclose(ngram["ngram_creativity"][2:], [2 * 3 / 5, 2 * 3 / 5])
    # members always pick the verbatim; "always A" is right when the verbatim is at A: 6 of 24;
    # the unsure model never names a letter: 0 of 24 asked, and no parsed answer at all
    np.testing.assert_allclose(decop["de_cop"], [1, 1, 6 / 24, 0])
    np.testing.assert_allclose(decop["de_cop_parsed"][:3], [1, 1, 6 / 24])
    assert np.isnan(decop["de_cop_parsed"][3])
    assert "24 of 96 answers (25.0 %) named no option" in caplog.text
    assert "(1 texts had no parsable answer)" in caplog.text


def test_imprint_run_over_http_counts_the_new_request_kinds_and_reruns_from_the_store(tmp_path):
    rows = [{"text": t, "label": 1} for t in MEMBERS] + [
        {"text": t, "label": 0} for t in NON_MEMBERS
    ]
    rows.append({"text": "Hi", "label": 0})  # one unit: no prefix/suffix split
    data = tmp_path / "texts.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    with FakeOpenAIServer(scripted, api_key=KEY, models=("scripted",)) as server:

        def config(out: str) -> RunConfig:
            return config_from_flags(
                model="scripted",
                data=str(data),
                out=tmp_path / out,
                attacks=("ngram_coverage", "de_cop"),
                params={"ngram_coverage": {"n_samples": 2}, "de_cop": {"n_orderings": 4}},
                api_base=server.base_url,
                api_key_env=ENV,
                api_mode="chat",
                n_bootstrap=20,
                blind=False,
                cache=tmp_path / "cache.sqlite",
                progress=False,
            )

        first = execute_run(config("run1"))
        sent = len(server.log)
        second = execute_run(config("run2"))
        assert len(server.log) == sent  # the rerun is answered by the store
    kinds = first.manifest["requests"]["target"]
    assert kinds["paraphrase"]["executed"] == 3 * 5  # three prompts per text
    assert kinds["multiple_choice"]["executed"] == 4 * 5  # every text has usable paraphrases
    assert kinds["sample"]["executed"] == 4  # "Hi" has no prefix to continue
    assert all(
        c["executed"] == 0
        for kinds2 in second.manifest["requests"].values()
        for c in kinds2.values()
    )
    scores = first.scores
    assert np.isnan(scores["ngram_coverage"][-1]) and np.isfinite(scores["de_cop"][-1])
    np.testing.assert_allclose(scores["ngram_coverage"][:4], [1, 1, 3 / 5, 3 / 5])
    assert first.metrics.attacks["ngram_coverage"].n_nan == 1
    for column in scores:
        np.testing.assert_array_equal(scores[column], second.scores[column])


def test_de_cop_in_all_for_an_api_target_and_text_only_paraphrase_fields(tmp_path):
    names = [a.name for a in build_attacks(["all"], RunContext(target_access="black-box"))]
    assert {"ngram_coverage", "de_cop"} <= set(names)
    rows = [
        {"text": t, "label": int(t in MEMBERS), "paras": [f"{t} (v{k})" for k in range(3)]}
        for t in [*MEMBERS, *NON_MEMBERS]
    ]
    data = tmp_path / "texts.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    with FakeOpenAIServer(scripted, api_key=KEY, models=("scripted",)) as server:
        result = run_de_cop(server, data, tmp_path, n_bootstrap=20)
    kinds = result.manifest["requests"]["target"]
    assert "paraphrase" not in kinds and kinds["multiple_choice"]["executed"] == 24 * 4
    np.testing.assert_allclose(result.scores["de_cop"], [1, 1, 6 / 24, 0])
    assert result.metrics.attacks["de_cop"].auc.estimate == 1.0


# -- the tiny model, end to end ----------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tiny_model_dir) -> HFLogprobBackend:
    return HFLogprobBackend(str(tiny_model_dir), device="cpu")


def test_tiny_model_library_scores_multilingual_and_short_texts(tiny, caplog):
    texts = [*MULTILINGUAL, "Hi", ""]
    ngram = NGramCoverage(n_samples=3).score_with_backend(tiny, texts)
    for column in ngram.values():
        assert np.isfinite(column[:4]).all() and (column[:4] >= 0).all()
        assert np.isnan(column[4:]).all()  # a single unit, and nothing: no suffix to compare
    assert (ngram["ngram_coverage"][:4] <= 1).all()
    caplog.set_level(logging.WARNING, logger="imprint.attacks.de_cop")
    decop = DECOP(n_orderings=3).score_with_backend(tiny, texts)
    assert np.isfinite(decop["de_cop"][:5]).all() and np.isnan(decop["de_cop"][5])
    assert ((decop["de_cop"][:5] >= 0) & (decop["de_cop"][:5] <= 1)).all()
    assert "1 of 6 texts had a missing, empty or verbatim paraphrase" in caplog.text
    # seeded: the same generations and answers again
    again = NGramCoverage(n_samples=3).score_with_backend(tiny, texts)
    np.testing.assert_array_equal(again["ngram_coverage"], ngram["ngram_coverage"])


def test_tiny_model_long_text_through_a_run(tiny_model_dir, tiny_ref_dir, tmp_path):
    long = " ".join(MULTILINGUAL * 6)  # ~250 units: longer than the tiny model's 128 positions
    rows = [{"text": t, "label": i % 2} for i, t in enumerate([*MULTILINGUAL, long, long[::-1]])]
    data = tmp_path / "texts.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    torch.manual_seed(0)
    result = execute_run(
        config_from_flags(
            model=str(tiny_model_dir),
            data=str(data),
            out=tmp_path / "run",
            attacks=("ngram_coverage", "de_cop"),
            params={
                "ngram_coverage": {"n_samples": 2, "max_tokens": 12},
                "de_cop": {
                    "n_orderings": 2,
                    "paraphrase_max_tokens": 12,
                    "paraphraser": str(tiny_ref_dir),  # another model writes the paraphrases
                },
            },
            device="cpu",
            n_bootstrap=20,
            blind=False,
            cache=tmp_path / "cache.sqlite",
            progress=False,
        )
    )
    assert set(result.scores) == {"ngram_coverage", "ngram_creativity", "de_cop", "de_cop_parsed"}
    for column in ("ngram_coverage", "ngram_creativity", "de_cop"):
        assert np.isfinite(result.scores[column]).all(), column
    kinds = result.manifest["requests"]
    # a local target answers by its letter logits (one forward per question, no generation)
    assert kinds["target"]["letter_logprobs"]["executed"] == 2 * 6
    assert "multiple_choice" not in kinds["target"]
    assert result.manifest["attacks"]["de_cop"]["decision_rule"] == "letter_logits"
    assert "paraphrase" not in kinds["target"]
    assert kinds["paraphraser"]["paraphrase"]["executed"] == 3 * 6


def test_local_instructions_go_through_the_chat_template(tiny_model_dir, tmp_path):
    """A local instruct model gets DE-COP's question and the paraphrase prompts (task "answer")
    in its chat template, as a chat endpoint would; continuations stay raw text after one BOS."""
    import shutil

    from transformers import AutoTokenizer

    from imprint.backends.text import HFTextBackend

    chat_dir = shutil.copytree(tiny_model_dir, tmp_path / "chat")
    tokenizer = AutoTokenizer.from_pretrained(chat_dir)
    tokenizer.chat_template = "{% for m in messages %}USER: {{ m['content'] }}\nBOT:{% endfor %}"
    tokenizer.save_pretrained(chat_dir)
    backend = HFTextBackend(HFLogprobBackend(str(chat_dir), device="cpu"))
    decode = backend.hf.tokenizer.decode
    assert decode(backend._prompt_ids("Pick one.", "answer")) == "USER: Pick one.\nBOT:"
    plain = backend._prompt_ids("Pick one.", "continue")
    assert plain == [backend.hf.bos_id, *backend.hf.encode("Pick one.")]
    plain_tiny = HFTextBackend(HFLogprobBackend(str(tiny_model_dir), device="cpu"))  # no template
    assert plain_tiny._prompt_ids("Pick one.", "answer") == plain
    out = backend.sample(
        ["Pick one.", "Another question, longer."],
        SamplingSettings(1, 3, temperature=0.0, task="answer"),
    )
    assert [len(o) for o in out] == [1, 1]
