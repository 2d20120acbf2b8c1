"""Defaults that follow the authors' code (issue 19, item 4): EZ-MIA's first scored position,
Tag&Tab's keyword selection and the n-gram coverage creativity index, each pinned on values
computed by hand; the alternatives stay available by name."""

from __future__ import annotations

import math

import numpy as np
import pytest

from imprint.attacks.ez_mia import EzMia, ez_score
from imprint.backends.base import TokenStats
from imprint.signals.needs import Need, SignalSet

# -- EZ-MIA: the authors' ignore_bos=True drops the first scored position -----------------------
# error positions (argmax != token): 0, 1, 3; shifts there: +2.0, -1.0, +0.5
TARGET = [-1.0, -2.0, -0.5, -1.5]
REF = [-3.0, -1.0, -0.4, -2.0]
IDS = [5, 6, 7, 8]
ARGMAX = [0, 0, 7, 0]


def _stats(logp, ids, argmax) -> TokenStats:
    n = len(logp)
    return TokenStats(
        token_ids=np.asarray(ids, np.int32),
        logp=np.asarray(logp, np.float32),
        mean_logp=np.zeros(n, np.float32),
        var_logp=np.ones(n, np.float32),
        rank=np.ones(n, np.int32),
        argmax=np.asarray(argmax, np.int32),
    )


def test_ez_score_by_hand_with_and_without_the_first_position():
    # all three errors: P = 2.5, N = 1.0 -> 2.5 / 3.5
    assert ez_score(TARGET, REF, IDS, ARGMAX) == pytest.approx(2.5 / 3.5)
    # the first position dropped (the authors' mask[0] = 0): P = 0.5, N = 1.0 -> 1 / 3
    assert ez_score(TARGET, REF, IDS, ARGMAX, skip_first=True) == pytest.approx(0.5 / 1.5)
    # dropping it can leave fewer than min_error_tokens errors: undefined
    assert math.isnan(ez_score([-1.0, -1.0], [-2.0, -3.0], [1, 2], [0, 0], skip_first=True))


def test_ez_mia_drops_the_first_scored_position_by_default_and_says_so():
    signals = SignalSet(
        ["text 0"],
        {
            Need(): [(_stats(TARGET, IDS, ARGMAX),)],
            Need(model="base"): [(_stats(REF, IDS, IDS),)],
        },
    )
    default = EzMia(refs=("base",))
    assert default.ignore_bos is True
    assert default.score(signals)["ez_mia[base]"][0] == pytest.approx(1 / 3)
    kept = EzMia(refs=("base",), ignore_bos=False).score(signals)
    assert kept["ez_mia[base]"][0] == pytest.approx(2.5 / 3.5)
    stated = " ".join(EzMia.deviations)
    assert "returns 0" in stated and "start_token=none" in stated


# -- n-gram coverage: the authors' creativity index counts runs of >= min_ngram words ----------


def test_creativity_index_by_hand_reference_code_and_per_n():
    from imprint.attacks.ngram_coverage import NGramCoverage, coverage_words, creativity

    gen = coverage_words("a b x c d e")  # 6 words
    ref = coverage_words("a b y c d e z")
    # runs found in ref: "a b" (2 words) and "c d e" (3 words)
    # each n from its own definition: n = 2 covers 5 words, n = 3 covers 3, n >= 4 none
    assert creativity(gen, ref, 2, 12) == pytest.approx((5 + 3) / 6)
    # the authors' spans are runs of >= 3 words (compute_ngram_coverage --min_ngram 3); their
    # n = 2 term keeps the spans of >= 2 words among those, i.e. the n = 3 term again
    assert creativity(gen, ref, 2, 12, min_run=3) == pytest.approx((3 + 3) / 6)
    # n = 1 .. 3 with min_run 3: three copies of the n = 3 term
    assert creativity(gen, ref, 1, 3, min_run=3) == pytest.approx(3 * 3 / 6)
    attack = NGramCoverage()
    assert attack.creativity_terms == "reference_code"
    suffix = "a b y c d e z"
    assert attack.text_scores(["a b x c d e"], suffix)[1] == pytest.approx(1.0)
    per_n = NGramCoverage(creativity_terms="per_n").text_scores(["a b x c d e"], suffix)
    assert per_n[1] == pytest.approx(8 / 6)


def test_creativity_terms_is_validated():
    from imprint.attacks.ngram_coverage import NGramCoverage
    from imprint.errors import ConfigError

    with pytest.raises(ConfigError, match="creativity_terms"):
        NGramCoverage(creativity_terms="lu")


# -- Tag&Tab: the authors' keyword selection ---------------------------------------------------
# hand-made word frequencies (p); -p log2 p grows with p below 1/e, so lower p = lower entropy
FREQ = {
    "zorp": 1e-6,
    "barn": 2e-6,
    "today": 5e-6,
    "old": 1e-5,
    "near": 1e-4,
    "met": 1e-4,
    "well-known": 2e-4,  # wordfreq knows the hyphenated form ...
    "wellknown": 0.0,  # ... but not the merged one the authors look up: entropy 0, picked first
    "a": 0.02,
    "the": 0.05,
}


def _picked(text: str, **kw) -> list[str]:
    from imprint.attacks.tag_tab import keywords, sentences

    (sentence,) = sentences(text, min_words=7, max_words=40)
    return [w.text for w in keywords(sentence, 4, FREQ.__getitem__, **kw)]


def test_tag_tab_keywords_by_hand_hyphen_merged_and_repeats_fill_slots():
    text = "Zorp met the zorp near a well-known old barn today."
    # authors: keys zorp met the zorp near a wellknown old barn today; by entropy:
    # wellknown (0), zorp, zorp, barn, today, old, near, met, a, the
    # pool of 10 occurrences -> distinct in entropy order -> the first k = 4
    assert _picked(text) == ["well-known", "Zorp", "barn", "today"]
    # pool = k = 4: the repeated "zorp" takes two of the four slots: 3 keywords
    assert _picked(text, pool=4) == ["well-known", "Zorp", "barn"]
    # the word as written ("well-known", p = 2e-4) and no pool: the 4 rarest distinct words
    assert _picked(text, pool=0, lookup="as_written") == ["Zorp", "barn", "today", "old"]
    # a word repeated past the pool leaves fewer than k distinct keywords at the default pool
    many = "zorp " * 8 + "well-known barn old the."
    assert _picked(many) == ["well-known", "zorp", "barn"]


def test_tag_tab_defaults_and_stated_differences():
    from imprint.attacks.tag_tab import TagTab
    from imprint.errors import ConfigError

    attack = TagTab()
    assert (attack.k, attack.pool, attack.lookup) == (4, 10, "stripped")
    assert any("set order" in d for d in TagTab.deviations)
    with pytest.raises(ConfigError, match="pool"):
        TagTab(pool=-1)
    with pytest.raises(ConfigError, match="lookup"):
        TagTab(lookup="lower")
