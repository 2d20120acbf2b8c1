"""DC-PDD: reference-corpus reading and counting, the per-tokenizer count cache, and the
prepare -> plan -> score flow on the tiny model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import quiet_wikimia_run

from imprint.attacks.base import RunContext
from imprint.attacks.dc_pdd import DcPdd, corpus_digest, iter_corpus_texts
from imprint.backends.hf import HFLogprobBackend
from imprint.data.sample import Sample
from imprint.errors import ConfigError, DataError
from imprint.requests import RequestRunner, RequestStore
from imprint.requests.client import ModelRequests
from imprint.signals.cache import SignalCache
from imprint.signals.plan import run_plan

#: tiny models run faster on one thread than on oversubscribed cores
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("ab\n\nb\n", encoding="utf-8")
    rows = [{"text": "ba"}, {"content": "c"}]
    (root / "sub" / "b.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (root / "ignored.bin").write_bytes(b"\x00\x01")
    return root


def char_ids(text: str) -> list[int]:
    return [ord(c) - ord("a") for c in text.strip()]


def test_corpus_texts_from_text_and_jsonl_files(corpus):
    assert [t.strip() for t in iter_corpus_texts(corpus)] == ["ab", "b", "ba", "c"]


class _Tokenizer:
    """A stand-in target: counts its tokenizer calls; ``fingerprint`` names the model."""

    def __init__(self, fingerprint: str) -> None:
        self.fingerprint, self.calls = fingerprint, 0

    def encode(self, text: str) -> list[int]:
        self.calls += 1
        return char_ids(text)


def _prepared_counts(corpus, backend, store_path):
    client = ModelRequests({"target": backend}, RequestRunner(RequestStore(store_path)))
    run = RunContext(tokenize=backend.encode, target_fingerprint=backend.fingerprint)
    run = dataclasses.replace(run, requests=client)
    attack = DcPdd(corpus=str(corpus), vocab_size=3).prepare([], run).attack
    return attack.counts, client.runner.counts.of("target", "token_counts")


def test_counts_are_stored_per_fingerprint_as_prepared_state(corpus, tmp_path):
    first = _Tokenizer("fp-1")
    counts, n = _prepared_counts(corpus, first, tmp_path / "c.sqlite")
    assert list(counts) == [2, 3, 1]  # a: 2, b: 3, c: 1
    assert (n.executed, first.calls) == (1, 4)
    again = _Tokenizer("fp-1")  # a new run on the same store counts nothing
    counts, n = _prepared_counts(corpus, again, tmp_path / "c.sqlite")
    assert list(counts) == [2, 3, 1] and (n.cache_hits, again.calls) == (1, 0)
    other = _Tokenizer("fp-2")  # another tokenizer counts again
    _prepared_counts(corpus, other, tmp_path / "c.sqlite")
    assert other.calls == 4


def test_corpus_digest_covers_the_middle_of_a_file(tmp_path):
    big = tmp_path / "big.txt"
    lines = [f"line {i} " + "x" * 80 for i in range(60_000)]  # ~5 MB, more than 2 MiB
    big.write_text("\n".join(lines))
    before = corpus_digest(big)
    lines[30_000] = "edited " + "y" * 82
    big.write_text("\n".join(lines))
    assert big.stat().st_size == len("\n".join(lines))
    assert corpus_digest(big) != before


def test_bad_corpus_inputs_teach(tmp_path, corpus):
    with pytest.raises(ConfigError, match="neither a file nor a folder"):
        DcPdd(corpus=str(tmp_path / "absent"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="has no"):
        DcPdd(corpus=str(tmp_path / "empty"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\nnot json\n')
    with pytest.raises(DataError, match="line 2"):
        list(iter_corpus_texts(bad))
    with pytest.raises(ConfigError, match="tokenizer"):
        DcPdd(corpus=str(corpus), vocab_size=10).prepare([], RunContext())


def test_score_before_prepare_is_refused(corpus):
    from imprint.signals.needs import Need, SignalSet

    attack = DcPdd(corpus=str(corpus), a=0.5)
    with pytest.raises(ConfigError, match="prepare"):
        attack.score(SignalSet([], {Need(): []}))


def test_prepare_plan_score_with_a_corpus(tiny_model_dir, tmp_path):
    backend = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    corpus = tmp_path / "ref.txt"
    corpus.write_text("The quick brown fox jumps over the lazy dog.\nThe council met.\n")
    samples = [Sample("0", "The quick brown fox.", 1), Sample("1", "Hurricane Ana was here.", 0)]
    run = RunContext(
        tokenize=backend.encode,
        target_fingerprint=backend.fingerprint,
        vocab_size=backend.vocab_size,
    )
    texts = [s.text for s in samples]
    with_corpus = DcPdd.for_run(run, corpus=str(corpus), a=1.0)
    pooled = DcPdd.for_run(run, a=1.0)
    assert with_corpus.vocab_size == backend.model.config.vocab_size
    scores = {}
    for unprepared in (with_corpus, pooled):
        attack = unprepared.prepare(samples, run).attack or unprepared
        signals, _ = run_plan(texts, attack.needs(), {"target": backend}, SignalCache(None))
        scores[attack.corpus] = attack.score(signals)["dc_pdd"]
        assert np.isfinite(scores[attack.corpus]).all() and (scores[attack.corpus] > 0).all()
    # a token the corpus lacks is rarer there than in the pooled texts: larger alpha
    assert not np.allclose(scores[str(corpus)], scores[None])


def test_v_is_the_model_vocabulary_not_the_largest_id_seen(tiny_model_dir):
    """Scores equal a hand computation with V = the model's vocabulary; the old V (largest id seen
    + 1) gives other scores."""
    backend = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    texts = ["The quick brown fox.", "Der schnelle braune Fuchs. 東京は大きい。"]
    attack = DcPdd.for_run(RunContext(vocab_size=backend.vocab_size), a=1.0)
    attack = attack.prepare([], RunContext()).attack or attack
    signals, _ = run_plan(texts, attack.needs(), {"target": backend}, SignalCache(None))
    out = attack.score(signals)["dc_pdd"]
    stats = signals.get()
    counts = np.zeros(backend.vocab_size)
    for s in stats:
        np.add.at(counts, s.token_ids, 1)
    n, v = counts.sum(), backend.vocab_size
    expected = []
    for s in stats:
        _, first = np.unique(s.token_ids, return_index=True)
        p = np.exp(s.logp[first].astype(np.float64))
        expected.append(
            np.mean(np.minimum(p * np.log((n + v) / (counts[s.token_ids[first]] + 1)), 1.0))
        )
    assert out == pytest.approx(expected, rel=1e-6)
    seen = max(int(s.token_ids.max()) for s in stats) + 1
    assert seen < v  # so the two definitions differ here
    old = DcPdd(a=1.0, vocab_size=1).score(signals)["dc_pdd"]  # V clamps to largest id + 1
    assert not np.allclose(out, old)


def test_a_run_uses_the_target_vocabulary_and_records_it(tiny_model_dir, tmp_path):
    result = quiet_wikimia_run(
        tmp_path, tiny_model_dir, n_per_label=6, n_bootstrap=20, attacks=("dc_pdd",)
    )
    backend = HFLogprobBackend(str(tiny_model_dir), device="cpu")
    assert result.manifest["attacks"]["dc_pdd"]["vocab_size"] == backend.vocab_size
    assert np.isfinite(result.scores["dc_pdd"]).all()
