"""DC-PDD (Zhang et al. 2024): calibrate token probabilities by token frequencies in a corpus.

For the first occurrence of each distinct token of x (repeats are skipped),
alpha_t = p(x_t | x_<t) * log(1 / f(x_t)), clipped above at ``a`` (default 0.01, the paper's and the
official code's value); score = mean alpha_t. f is the Laplace-smoothed frequency of the token in a
reference corpus, f(v) = (c(v) + 1) / (N + V), counted with the TARGET tokenizer. The official code
negates the mean and ranks with ``-score``: members have the larger mean alpha, so here score =
mean alpha, higher = member.

Reference corpus (``corpus``): a text file, a JSONL/JSON file (field ``text``, ``input`` or
``content``) or a folder of such files, searched recursively. Counts are cached per target
fingerprint and the corpus's full content digest as a ``token_counts`` request in the run's request
store, so a corpus is tokenised once per tokenizer. The counts are the attack's prepared state
(the ``counts`` field ``prepare`` fills in), not a module-level cache.

Default without a corpus: the evaluation texts themselves, pooled. This does not leak labels: the
counts never see a label, every text adds its tokens to the one shared table in the same way, and
the table is applied identically to every sample, so it uses only what an attacker holding the
candidate set has. It is a smaller and less neutral corpus than the paper's (C4 excerpts): when
members and non-members differ in topic (e.g. temporal splits) their words differ in frequency
too, the same artefact the blind baseline measures. Name a corpus for the paper's setting.

V in the smoothing is the target model's vocabulary size (``vocab_size``; a run fills it in from
the target: the entries of its next-token distribution, as the official code's ``vob_siz``, 50304
for Pythia), so an unseen token gets 1 / (N + V) as in the paper. V matters: changing it to V'
adds p_t * log((N + V') / (N + V)) to every alpha_t before the clip, which moves texts by
different amounts. (Before, V was the largest token id seen + 1, which depends on the texts.)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from imprint.attacks.base import Attack, Preparation, RunContext, prepared_field, register
from imprint.backends.filehash import file_digest
from imprint.backends.models import cache_dir
from imprint.data.sample import Sample
from imprint.errors import ConfigError, DataError
from imprint.signals.needs import Need, SignalSet

COUNTS_VERSION = "1"  # bump when counting changes what a cached table means
TEXT_SUFFIXES = (".txt", ".md", ".text")
JSON_SUFFIXES = (".jsonl", ".ndjson", ".json")
_TEXT_FIELDS = ("text", "input", "content")


def first_occurrences(token_ids: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each distinct token, in text order."""
    _, first = np.unique(np.asarray(token_ids), return_index=True)
    return np.sort(first)


def smoothed_frequencies(counts: np.ndarray, vocab_size: int | None = None) -> np.ndarray:
    """Laplace smoothing (c + 1) / (N + V), shape (V,); V defaults to len(counts)."""
    v = max(len(counts), vocab_size or 0)
    padded = np.zeros(v, dtype=np.float64)
    padded[: len(counts)] = counts
    return (padded + 1.0) / (padded.sum() + v)


def dc_pdd_score(
    token_ids: np.ndarray, logp: np.ndarray, frequencies: np.ndarray, *, a: float = 0.01
) -> float:
    """DC-PDD score of one text: mean over first occurrences of min(p_t * log(1/f(x_t)), a).

    ``token_ids`` and ``logp`` have shape (T,); ``frequencies`` is indexed by token id.
    """
    idx = first_occurrences(token_ids)
    ids = np.asarray(token_ids)[idx]
    if ids.size == 0:
        raise ValueError("cannot score an empty text")
    if ids.max() >= len(frequencies):
        raise ValueError(
            f"token id {int(ids.max())} is outside the frequency table ({len(frequencies)} entries)"
        )
    p = np.exp(np.asarray(logp, dtype=np.float64)[idx])
    alpha = p * -np.log(frequencies[ids])
    return float(np.mean(np.minimum(alpha, a)))


def count_tokens(token_lists: Iterable[Sequence[int] | np.ndarray]) -> np.ndarray:
    """Occurrence counts per token id, shape (max id + 1,)."""
    counts = np.zeros(0, dtype=np.int64)
    for ids in token_lists:
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            continue
        if ids.max() >= len(counts):
            counts = np.concatenate([counts, np.zeros(int(ids.max()) + 1 - len(counts), np.int64)])
        counts += np.bincount(ids, minlength=len(counts))
    return counts


# -- reference corpus ---------------------------------------------------------------------------
def corpus_files(path: str | Path) -> list[Path]:
    """The files of a corpus: the file itself, or a folder's text/JSON files (recursive, sorted)."""
    root = Path(path).expanduser()
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise ConfigError(f"dc_pdd corpus {str(path)!r} is neither a file nor a folder")
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES + JSON_SUFFIXES
    )
    if not files:
        raise ConfigError(
            f"dc_pdd corpus folder {str(path)!r} has no "
            f"{'/'.join(TEXT_SUFFIXES + JSON_SUFFIXES)} files"
        )
    return files


def _record_text(record: object, where: str) -> str:
    if isinstance(record, str):
        return record
    if isinstance(record, dict):
        for name in _TEXT_FIELDS:
            if isinstance(record.get(name), str):
                return str(record[name])
    raise DataError(
        f"{where}: expected a string or an object with a {'/'.join(_TEXT_FIELDS)} field"
    )


def iter_corpus_texts(path: str | Path) -> Iterator[str]:
    """Documents of a corpus: a text file's non-empty lines, JSONL rows, JSON array items."""
    for f in corpus_files(path):
        suffix = f.suffix.lower()
        with f.open(encoding="utf-8") as handle:
            if suffix == ".json":
                data = json.load(handle)
                items = data if isinstance(data, list) else [data]
                for i, item in enumerate(items):
                    yield _record_text(item, f"{f} item {i}")
            elif suffix in JSON_SUFFIXES:
                for n, line in enumerate(handle, 1):
                    if line.strip():
                        try:
                            record = json.loads(line)
                        except json.JSONDecodeError as err:
                            raise DataError(f"{f} line {n}: not valid JSON ({err.msg})") from err
                        yield _record_text(record, f"{f} line {n}")
            else:
                yield from (line for line in handle if line.strip())


def corpus_digest(path: str | Path) -> str:
    """Content fingerprint of a corpus: each file's relative name and full-content sha256."""
    root = Path(path).expanduser()
    digest = hashlib.sha256(f"counts-v{COUNTS_VERSION}|".encode())
    for f in corpus_files(root):
        name = f.relative_to(root) if root.is_dir() else f.name
        whole = file_digest(f, memo_dir=cache_dir() / "file-digests")
        digest.update(f"{name}|{whole}|".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:32]


def corpus_counts(path: str | Path, tokenize: Callable[[str], list[int]]) -> np.ndarray:
    """Token counts of a corpus (no persistence: a run stores them through its requests)."""
    counts = count_tokens(tokenize(text) for text in iter_corpus_texts(path))
    if counts.sum() == 0:
        raise DataError(f"dc_pdd corpus {str(path)!r} has no tokens")
    return counts


@register("dc_pdd")
@dataclass(frozen=True)
class DcPdd(Attack):
    corpus: str | None = None
    a: float = 0.01
    vocab_size: int | None = None  # V of the smoothing; None: the run's target vocabulary
    counts: np.ndarray | None = prepared_field()  # the corpus's token counts, set by prepare()

    summary = (
        "token probabilities calibrated by corpus token frequencies (first occurrences, a=0.01, "
        "Laplace smoothing with V = the target's vocabulary, as the paper)"
    )
    paper = (
        "Zhang et al. 2024, Pretraining Data Detection for Large Language Models: "
        "A Divergence-based Calibration Method"
    )

    def __post_init__(self) -> None:
        if not self.a > 0:
            raise ConfigError(f"dc_pdd a (upper bound of alpha) must be > 0, got {self.a}")
        if self.vocab_size is not None and self.vocab_size < 1:
            raise ConfigError(f"dc_pdd vocab_size must be >= 1, got {self.vocab_size}")
        if self.corpus is not None:
            corpus_files(self.corpus)  # fail at construction on a missing corpus

    @classmethod
    def for_run(cls, run: RunContext, **params: Any) -> Attack:
        # the manifest then records the V actually used
        if params.get("vocab_size") is None:
            params["vocab_size"] = run.vocab_size
        return cls(**params)

    def _vocab(self) -> int:
        if self.vocab_size is None:
            raise ConfigError(
                "dc_pdd: the vocabulary size V of its Laplace smoothing is unknown. A run takes "
                "it from the target model; outside a run (or for a target that does not report "
                "it) pass DcPdd(vocab_size=...) or --param dc_pdd.vocab_size=N, the number of "
                "entries of the model's next-token distribution (model.config.vocab_size)"
            )
        return self.vocab_size

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        if self.vocab_size is None and run.vocab_size is not None:  # built before the target
            bound = replace(self, vocab_size=run.vocab_size)  # loaded: V is the target's
            prep = bound.prepare(samples, run)
            return prep if prep.attack is not None else replace(prep, attack=bound)
        self._vocab()  # before any model pass
        if self.corpus is None:
            return Preparation()
        if run.tokenize is None or not run.target_fingerprint:
            raise ConfigError(
                "dc_pdd with a corpus needs the run's target tokenizer and "
                "fingerprint (RunContext.tokenize, target_fingerprint)"
            )
        if run.requests is not None:
            corpus = self.corpus
            counts = run.requests.token_counts(
                "target",
                corpus_digest(corpus),
                lambda: iter_corpus_texts(corpus),
                count_tokens,
            )
            if counts.sum() == 0:
                raise DataError(f"dc_pdd corpus {corpus!r} has no tokens")
        else:
            counts = corpus_counts(self.corpus, run.tokenize)
        return Preparation(attack=replace(self, counts=counts))

    def needs(self) -> tuple[Need, ...]:
        return (Need(),)

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        stats = signals.get()
        if self.corpus is None:
            counts = count_tokens(s.token_ids for s in stats)
        elif self.counts is not None:
            counts = self.counts
        else:
            raise ConfigError(
                f"dc_pdd: corpus {self.corpus!r} was not counted; score with the attack "
                "prepare(samples, run) returns (Preparation.attack)"
            )
        # an id past V (a tokenizer with tokens the model config does not count) still gets a row
        top = max((int(s.token_ids.max()) for s in stats if len(s)), default=0)
        freq = smoothed_frequencies(counts, max(self._vocab(), top + 1))
        return {
            self.name: np.array([dc_pdd_score(s.token_ids, s.logp, freq, a=self.a) for s in stats])
        }
