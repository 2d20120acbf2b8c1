"""Greedy n-gram selection, a blind attack in the style of Das, Zhang and Tramèr (2024).

Their ``greedy_selection`` picks, on training data only, word n-grams whose presence separates
members from non-members, one at a time, each chosen to cover the documents earlier choices
left uncovered. Here the chosen n-grams form a *decision list*: rule j is "the text contains
n-gram g_j", picked greedily as the n-gram whose presence is most one-sided (smoothed member
rate furthest from 1/2) among the training documents no earlier rule covers, with at least
``min_support`` documents of its majority class. A text's score is the member rate of the first
rule it satisfies (presence of the highest-ranked selected n-gram), or the member rate of the
documents no rule covers. Higher score = more likely member.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = ["GreedyNgramList", "fit_greedy_ngrams"]


@dataclass(frozen=True)
class GreedyNgramList:
    """A fitted decision list: ``ngrams[j]`` with member rate ``rates[j]`` (train fold),
    ``default`` the member rate of uncovered training documents, ``support[j]`` the number of
    training documents rule j covered when it was chosen."""

    ngrams: tuple[str, ...]
    rates: tuple[float, ...]
    support: tuple[int, ...]
    default: float
    ngram_range: tuple[int, int]

    def score(self, texts: Sequence[str]) -> NDArray[np.float64]:
        """Score of each text, shape (len(texts),): the rate of its first satisfied rule."""
        out = np.full(len(texts), self.default, dtype=np.float64)
        if not self.ngrams:
            return out
        from sklearn.feature_extraction.text import CountVectorizer

        vec = CountVectorizer(
            binary=True, ngram_range=self.ngram_range, vocabulary=list(self.ngrams)
        )
        present = vec.transform(texts).toarray().astype(bool)  # (t, rules) in rule order
        fired = present.any(axis=1)
        first = present.argmax(axis=1)
        out[fired] = np.asarray(self.rates)[first[fired]]
        return out


def fit_greedy_ngrams(
    texts: Sequence[str],
    labels: NDArray[np.int64],
    *,
    ngram_range: tuple[int, int] = (1, 3),
    max_rules: int = 100,
    min_support: int | None = None,
) -> GreedyNgramList:
    """Fit the decision list on training texts and labels (1 = member), shape (n,).

    ``min_support`` defaults to ``max(3, 2 % of the smaller class)`` documents.
    """
    from sklearn.feature_extraction.text import CountVectorizer

    y = np.asarray(labels).astype(bool)
    if min_support is None:
        min_support = max(3, int(0.02 * min(y.sum(), (~y).sum())))
    vec = CountVectorizer(binary=True, ngram_range=ngram_range, min_df=min_support)
    try:
        x = vec.fit_transform(texts).tocsc().astype(np.int64)
    except ValueError:  # empty vocabulary: nothing is frequent enough
        return GreedyNgramList((), (), (), float(y.mean()), ngram_range)
    names = vec.get_feature_names_out()
    uncovered = np.ones(y.size, dtype=bool)
    rules: list[tuple[int, float, int]] = []
    for _ in range(max_rules):
        tp = np.asarray(x.T @ (uncovered & y)).ravel()
        fp = np.asarray(x.T @ (uncovered & ~y)).ravel()
        rate = (tp + 1.0) / (tp + fp + 2.0)
        majority = np.where(rate >= 0.5, tp, fp)
        strength = np.where(majority >= min_support, np.abs(rate - 0.5), -1.0)
        if rules:
            strength[[j for j, _, _ in rules]] = -1.0
        best = int(np.argmax(strength))
        base = (uncovered & y).sum() / max(1, uncovered.sum())
        if strength[best] <= abs(base - 0.5) or strength[best] < 0:
            break
        covered = np.asarray(x[:, best].toarray()).ravel().astype(bool) & uncovered
        rules.append((best, float(rate[best]), int(covered.sum())))
        uncovered &= ~covered
        if not uncovered.any():
            break
    n_left = int(uncovered.sum())
    default = (float((uncovered & y).sum()) + 1.0) / (n_left + 2.0) if n_left else 0.5
    return GreedyNgramList(
        tuple(str(names[j]) for j, _, _ in rules),
        tuple(r for _, r, _ in rules),
        tuple(s for _, _, s in rules),
        default,
        ngram_range,
    )
