"""Black-box attack formulas on hand-computed cases: words, ROUGE-1, SaMIA, SimMIA, PETAL, with a
deterministic fake text backend and a fake embedder (no model)."""

from __future__ import annotations

import zlib
from dataclasses import asdict

import numpy as np
import pytest

from imprint.attacks import build_attacks
from imprint.attacks.base import RunContext
from imprint.attacks.petal import PETAL, fit_line, log_similarity, petal_score
from imprint.attacks.samia import SaMIA, split_prefix
from imprint.attacks.simmia import SimMIA, exact_rate, relative_score
from imprint.backends.base import SAMPLING, Backend
from imprint.data.sample import Sample
from imprint.data.words import (
    first_word,
    is_number,
    rouge1_recall,
    rouge_tokens,
    split_units,
    split_words,
    word_prefixes,
)
from imprint.errors import CapabilityError, ConfigError


class FakeText(Backend):
    """Answers each prompt with a fixed list of continuations; records what it was asked."""

    capabilities = frozenset({SAMPLING})
    name = "fake"
    fingerprint = "fake-text"

    def __init__(self, answers: dict[str, list[str]]) -> None:
        self.answers, self.calls = answers, []

    def sample(self, prompts, settings):
        self.calls.append({"prompts": list(prompts), **asdict(settings)})
        return [self.answers[p][: settings.n] for p in prompts]

    def usage(self):
        return {}


class TableEmbedder:
    """Unit vectors from a table; calls are counted."""

    def __init__(self, table: dict[str, tuple[float, ...]]) -> None:
        self.table, self.seen = table, []
        self.fingerprint = f"table-{sorted(table.items())}"  # another table, another model

    def embed(self, strings):
        self.seen.extend(strings)
        rows = np.array([self.table[s.strip()] for s in strings], dtype=np.float64)
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


# -- words ---------------------------------------------------------------------------------------
def test_split_words_keeps_numbers_hyphens_and_punctuation():
    words = [w.text for w in split_words("Ana's 1,000 twenty-first U.S. hit, in 2014.")]
    assert words == ["Ana's", "1,000", "twenty-first", "U", ".", "S", ".", "hit", ",", "in"] + [
        "2014",
        ".",
    ]
    assert word_prefixes("a b, c") == ["", "a", "a b", "a b,"]


@pytest.mark.parametrize(
    ("continuation", "ended", "expected"),
    [
        (" was", False, ("was", False)),  # the next token could continue the word
        (" was ", False, ("was", True)),
        (" was the", False, ("was", True)),
        (" twenty-", False, ("twenty", False)),  # a hyphen may join the next word
        (" twenty-first ", False, ("twenty-first", True)),
        (",", False, (",", True)),  # punctuation is final at once
        (" 2014.", False, ("2014", False)),  # 2014.5 is still possible
        (" 2014. ", False, ("2014", True)),
        ("   ", False, ("", False)),
        ("", True, ("", True)),
        (" Haw", True, ("Haw", True)),
        # U+FFFD at the end: a character whose bytes are not all there yet
        (" Krak\ufffd", False, ("Krak", False)),
        ("\ufffd", False, ("", False)),
        (" was \ufffd", False, ("was", True)),  # the space already ended the word
        (" twenty-\ufffd", False, ("twenty", False)),
        (" Krak\ufffd", True, ("Krak", True)),  # the budget ran out inside the character
        ("\ufffd", True, ("", True)),
        # unspaced scripts: a character is a word, final once anything follows it
        (" 会", False, ("会", False)),
        (" 会议", False, ("会", True)),
        ("か\ufffd", False, ("か", False)),  # the next character may be a mark: が
        (" हिन्", False, ("हिन्", False)),  # Devanagari signs are part of the word
        (" हिन्दी ", False, ("हिन्दी", True)),
    ],
)
def test_first_word_is_final_only_when_more_text_cannot_change_it(continuation, ended, expected):
    assert first_word(continuation, ended=ended) == expected


def test_split_words_is_unicode_aware():
    text = "Kraków (हिन्दी) 会议在首尔举行，2023年。Straße"
    assert [w.text for w in split_words(text)] == (
        ["Kraków", "(", "हिन्दी", ")"]
        + list("会议在首尔举行，")
        + ["2023"]
        + list("年。")
        + ["Straße"]
    )
    decomposed = "Krako\u0301w"  # o + combining acute: still one word
    assert [w.text for w in split_words(decomposed)] == [decomposed]
    assert [u.text for u in split_units("the council 会议在首尔 met")] == (
        ["the", "council"] + list("会议在首尔") + ["met"]
    )


def test_is_number():
    assert is_number("2014") and is_number("1,000") and is_number("3.5")
    assert not is_number("twenty") and not is_number("U")


def test_rouge1_recall_by_hand():
    ref = "The cat sat on the mat"  # the x2, cat, sat, on, mat: 6 unigrams
    assert rouge1_recall("the cat sat", ref) == pytest.approx(3 / 6)
    assert rouge1_recall("on the mat the mat", ref) == pytest.approx(4 / 6)  # mat clipped at 1
    assert rouge1_recall("THE. Cat!", ref) == pytest.approx(2 / 6)  # lowercase, no punctuation
    assert rouge1_recall("", ref) == 0.0 and rouge1_recall("x", "") == 0.0


def test_rouge1_keeps_non_ascii_letters_and_case_folds():
    zh = "会议在首尔举行，讨论了预算。"
    assert rouge1_recall(zh, zh) == 1.0  # every character is a unigram; punctuation dropped
    assert rouge_tokens(zh) == list("会议在首尔举行讨论了预算")
    assert rouge1_recall("会议在北京", zh) == pytest.approx(3 / 12)  # 会 议 在
    assert rouge_tokens("Kraków KRAKÓW Krako\u0301w") == ["kraków"] * 3  # NFKC, case-folded
    assert rouge1_recall("Krak w", "Kraków") == 0.0  # no longer split at the ó
    assert rouge1_recall("STRASSE", "Straße") == 1.0
    assert rouge1_recall("हिन्दी भाषा", "हिन्दी भाषा") == 1.0
    assert rouge1_recall("Москва", "москва и Киев") == pytest.approx(1 / 3)


# -- SaMIA ---------------------------------------------------------------------------------------
def test_samia_by_hand():
    text = "w1 w2 w3 the cat sat on the mat"  # 9 words: prefix = first 4
    assert split_prefix(text, 0.5) == ("w1 w2 w3 the", "cat sat on the mat")
    cands = [" cat sat", " the mat on the mat and more"]
    backend = FakeText({"w1 w2 w3 the": cands})
    scores = SaMIA(n_samples=2).score_with_backend(backend, [text])
    rouge = [2 / 5, 3 / 5]  # cat, sat | the, mat, on (mat clipped)
    sizes = [len(zlib.compress(c.strip().encode())) for c in cands]
    assert scores["samia"][0] == pytest.approx(np.mean(rouge))
    assert scores["samia_zlib"][0] == pytest.approx(np.mean(np.multiply(rouge, sizes)))
    call = backend.calls[0]
    assert call["n"] == 2 and call["max_tokens"] == 3 * 5 and call["top_k"] == 50
    assert call["temperature"] == 1.0


def test_samia_splits_unspaced_scripts_by_character():
    text = "会议在首尔举行，讨论了预算。"  # 14 characters (punctuation counts as a word here)
    prefix, suffix = split_prefix(text, 0.5)
    assert (prefix, suffix) == ("会议在首尔举行", "，讨论了预算。")
    cands = ["讨论了预算", "天气很好"]
    backend = FakeText({prefix: cands})
    scores = SaMIA(n_samples=2).score_with_backend(backend, [text])
    assert scores["samia"][0] == pytest.approx(np.mean([5 / 5, 0.0]))
    assert backend.calls[0]["max_tokens"] == 3 * 7
    # whitespace between words is kept as written, not re-joined with single spaces
    assert split_prefix("a  b\nc d", 0.5) == ("a  b", "c d")


def test_samia_validates_and_refuses_non_samplers():
    with pytest.raises(ConfigError):
        SaMIA(prefix_ratio=1.0)

    class LogprobsOnly(Backend):
        capabilities = frozenset({"logprobs"})

    with pytest.raises(CapabilityError):
        SaMIA().check_backend(LogprobsOnly())


def test_blackbox_attacks_are_not_in_all():
    names = {type(a).name for a in build_attacks(["all"])}
    assert not names & {"samia", "simmia", "petal"}


# -- SimMIA --------------------------------------------------------------------------------------
EMB = {"b": (1, 0), "x": (0, 1), "c": (0.6, 0.8), "y": (0.8, -0.6), "a": (1, 1)}


def test_simmia_by_hand():
    prefix = "P\n\n"
    backend = FakeText(
        {
            "a": [" b", " x"],
            "a b": [" c", " c"],
            prefix + "a": [" x", " x"],
            prefix + "a b": [" c", " y"],
        }
    )
    attack = SimMIA(n_samples=2, n_shots=1)
    scores = attack.score_with_backend(
        backend, ["a b c"], prefix=prefix, embedder=TableEmbedder(EMB)
    )
    # s(b | a) = (1 + 0.5) / 2 = 0.75, s(b | P a) = 0.5; s(c | a b) = 1, s(c | P a b) = 0.75
    assert scores["simmia"][0] == pytest.approx(-((0.5 / 0.75) + 0.75) / 2)
    # Laplace: (1+1)/4 vs (0+1)/4; (2+1)/4 vs (1+1)/4
    assert scores["simmia_star"][0] == pytest.approx(-(0.5 + 2 / 3) / 2)
    assert all(call["task"] == "next_word" and call["n"] == 2 for call in backend.calls)


def test_simmia_exact_numbers_and_short_texts():
    backend = FakeText({"in": [" 2014", " 2015"], "P in": [" 2015", " 2015"]})
    table = {"in": (1, 0), "2014": (0, 1), "2015": (0, 1)}  # embeddings call them identical
    emb = SimMIA(n_samples=2, n_shots=1).score_with_backend(
        backend, ["in 2014"], prefix="P ", embedder=TableEmbedder(table)
    )
    assert emb["simmia"][0] == pytest.approx(-1.0)
    exact = SimMIA(n_samples=2, n_shots=1, exact_numbers=True).score_with_backend(
        backend, ["in 2014"], prefix="P ", embedder=TableEmbedder(table)
    )
    assert exact["simmia"][0] == pytest.approx(-(1 / 4) / (2 / 4))
    one_word = SimMIA(n_samples=2, n_shots=1).score_with_backend(
        FakeText({}), ["alone"], prefix="P ", embedder=TableEmbedder(table)
    )
    assert np.isnan(one_word["simmia"][0])


def test_simmia_formula_helpers():
    assert exact_rate("a", {"a": 3.0, "b": 1.0}, 4) == pytest.approx(4 / 6)
    assert exact_rate("a", {"a": 0.5, "b": 0.5}, 10) == pytest.approx(6 / 12)  # expectation
    assert relative_score(np.array([0.5, 1.0]), np.array([1.0, 1.0])) == pytest.approx(-0.75)
    # a position with plain score 0 has no ratio: left out, not divided by a floor (was -2.5e11)
    assert relative_score(np.array([0.5, 0.5]), np.array([0.0, 0.5])) == pytest.approx(-1.0)
    assert np.isnan(relative_score(np.array([0.5]), np.array([0.0])))


def test_simmia_prepare_takes_nonmember_shots_out_of_the_evaluation():
    samples = [Sample(f"s{i}", f"text number {i}", i % 2) for i in range(8)]
    attack = SimMIA(n_shots=2)
    prep = attack.prepare(samples, RunContext(seed=3))
    assert len(prep.removed_ids) == 2 and prep.prefixes["simmia"].endswith("\n\n")
    assert all(next(s for s in samples if s.id == i).label == 0 for i in prep.removed_ids)
    with pytest.raises(ConfigError, match="prefix"):
        SimMIA().score_with_backend(FakeText({}), ["a b"])
    with pytest.raises(CapabilityError, match="exact"):
        SimMIA(mode="exact").check_backend(FakeText({}))


def test_simmia_old_expected_mode_names_its_new_name():
    with pytest.raises(ConfigError, match="greedy_topk") as err:
        SimMIA(mode="expected")
    assert "mode='exact'" in str(err.value)  # and where the real expectation is
    with pytest.raises(ConfigError, match="min_mass"):
        SimMIA(mode="exact", min_mass=1.5)
    with pytest.raises(ConfigError, match="top_k"):
        SimMIA(mode="greedy_topk", top_k=0)


# -- PETAL ---------------------------------------------------------------------------------------
def test_petal_formulas_by_hand():
    assert fit_line(np.array([0.0, 1.0, 2.0]), np.array([-3.0, -2.0, -1.0])) == pytest.approx(
        (1.0, -3.0)
    )
    assert fit_line(np.array([0.0, 0.0]), np.array([-1.0, -3.0])) == (0.0, -2.0)
    assert petal_score(np.array([0.5, 1.5]), 1.0, -3.0) == pytest.approx(-2.0)
    emb = TableEmbedder({"b": (1, 0), "x": (0, 1), "c": (0.6, 0.8)})
    sims = log_similarity(emb, ["b", "b", "c"], ["b", "x", "b"])
    assert sims == pytest.approx([0.0, np.log(1e-16), np.log(0.6)])


def test_petal_refuses_the_target_as_its_own_surrogate():
    class Target(Backend):
        spec = "smollm2-135m"
        capabilities = frozenset({SAMPLING})

    with pytest.raises(ConfigError, match="surrogate"):
        PETAL(surrogate="smollm2-135m").check_backend(Target())


def test_samia_suffix_without_words_has_no_score():
    """A suffix with no ROUGE words (emoji only) gives NaN (left out, counted), never a 0."""
    from imprint.attacks.samia import samia_scores, zlib_size

    assert all(np.isnan(v) for v in samia_scores(["whatever", "🙂"], "🙂 🎉 !!"))
    assert samia_scores(["a b"], "a c") == pytest.approx((0.5, 0.5 * zlib_size("a b")))
