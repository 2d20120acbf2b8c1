"""n-gram overlap: tokenisation, Bloom index vs an exact set, corpus reading, errors, CLI."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from imprint.cli import app as diagnostics_app
from imprint.data import Sample
from imprint.diagnostics.corpus import R_JSON, R_NO_TEXT, R_UTF8, iter_documents, new_stats
from imprint.diagnostics.decontam import R_ABOVE, R_UNDEFINED, filter_by_overlap
from imprint.diagnostics.ngrams import NgramBatch, ngram_hashes, normalize_words
from imprint.diagnostics.overlap import (
    NgramIndex,
    build_index,
    extend_index,
    merge_indexes,
    overlap_scores,
    plan_filter,
)
from imprint.errors import ConfigError

WORDS = [f"w{i}" for i in range(400)]


def _docs(rng: np.random.Generator, n: int, length: int = 40) -> list[str]:
    return [" ".join(rng.choice(WORDS, size=length)) for _ in range(n)]


def _exact(docs: list[str], n: int) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for d in docs:
        w = normalize_words(d)
        out.update(tuple(w[i : i + n]) for i in range(len(w) - n + 1))
    return out


def _write_jsonl(path: Path, docs: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    return path


def test_normalisation_matches_reference_and_hashes_are_consistent():
    texts = [
        "Don't  stop—the “U.S.” café\u00a0NAÏVE\x1cword\n\nnext…line",
        "",
        "  ...  ",
        "Hello, hello! HELLO? (hello)",
        "ÉCOLE d’été, 2023-02-18",
    ]
    batch = NgramBatch.from_texts(texts)
    reference = [normalize_words(t) for t in texts]
    assert reference[0] == ["dont", "stopthe", "us", "café", "naïve", "word", "nextline"]
    assert batch.words_per_doc().tolist() == [len(r) for r in reference]
    flat = [w for r in reference for w in r]
    by_word: dict[str, int] = {}
    for word, h in zip(flat, batch.word_hash.tolist(), strict=True):
        assert by_word.setdefault(word, h) == h  # same word, same hash wherever it is
    assert len(set(by_word.values())) == len(by_word)  # distinct words, distinct hashes
    hashes = ngram_hashes(texts, 2)
    assert [h.size for h in hashes] == [max(0, len(r) - 1) for r in reference]
    assert len(set(hashes[3].tolist())) == 1  # "hello hello" three times


def test_plan_filter_stays_within_target():
    for capacity, rate in [(1000, 0.01), (10**7, 0.001), (50, 0.05)]:
        plan = plan_filter(capacity, rate)
        assert plan["fp_rate_at_capacity"] <= rate
        assert plan["requested_rate"] <= rate
    with pytest.raises(ConfigError):
        plan_filter(10, 1.5)


def test_bloom_index_against_exact_set(tmp_path: Path):
    rng = np.random.default_rng(0)
    corpus, queries = _docs(rng, 300), _docs(rng, 200)
    path = _write_jsonl(tmp_path / "corpus.jsonl", corpus)
    manifest = build_index([path], [3, 5], tmp_path / "idx", fp_rate=0.01, measure_fp=True)
    index = NgramIndex.open(tmp_path / "idx")
    for n in (3, 5):
        info = manifest["filters"][str(n)]
        assert info["fp_rate_at_capacity"] <= 0.01
        assert info["fp_rate_estimated"] <= 0.0105
        assert info["fp_rate_measured"] <= 0.0125
        # no false negatives: every corpus n-gram is found
        assert np.all(overlap_scores(index, corpus, n).values == 1.0)
        # false positives on n-grams absent from the corpus stay near the target rate
        exact = _exact(corpus, n)
        absent_fp, absent = 0, 0
        for doc, keys in zip(queries, ngram_hashes(queries, n), strict=True):
            words = normalize_words(doc)
            found = index.contains(n, keys)
            for i, hit in enumerate(found.tolist()):
                if tuple(words[i : i + n]) not in exact:
                    absent += 1
                    absent_fp += hit
                else:
                    assert hit
        assert absent > 5000
        assert absent_fp / absent <= 0.015


def test_short_texts_are_undefined_not_zero(tmp_path: Path):
    path = _write_jsonl(tmp_path / "c.jsonl", ["a b c d e f g h"])
    build_index([path], [7], tmp_path / "idx", capacity=100)
    index = NgramIndex.open(tmp_path / "idx")
    scores = overlap_scores(index, ["a b c d e f g", "x y", "", "q r s t u v w"], 7)
    assert scores.values[0] == 1.0
    assert math.isnan(scores.values[1]) and math.isnan(scores.values[2])
    assert scores.values[3] == 0.0
    assert scores.n_undefined == 2
    assert scores.n_words.tolist() == [7, 2, 0, 7]


def test_index_n_mismatch_is_a_clear_error(tmp_path: Path):
    path = _write_jsonl(tmp_path / "c.jsonl", ["one two three four five six seven eight"])
    build_index([path], [7], tmp_path / "idx", capacity=10)
    with pytest.raises(ConfigError, match=r"built for n=\[7\], not n=\[13\]"):
        NgramIndex.open(tmp_path / "idx", [13])
    index = NgramIndex.open(tmp_path / "idx")
    with pytest.raises(ConfigError, match="not n=4"):
        overlap_scores(index, ["a b c d"], 4)
    with pytest.raises(ConfigError, match="already holds"):
        build_index([path], [7], tmp_path / "idx", capacity=10)


def test_undecodable_and_bad_lines_are_counted(tmp_path: Path):
    import zstandard

    good = [json.dumps({"text": f"doc {i} has words"}).encode() for i in range(5)]
    lines = [*good, b'{"text": "caf\xe9 latin-1"}', b"not json", b'{"body": "x"}', b""]
    raw = b"\n".join(lines) + b"\n"
    files = {
        "c.jsonl": raw,
        "c.jsonl.gz": gzip.compress(raw),
        "c.jsonl.zst": zstandard.ZstdCompressor().compress(raw),
    }
    for name, payload in files.items():
        (tmp_path / name).write_bytes(payload)
        stats = new_stats(tmp_path / name)
        docs = list(iter_documents(tmp_path / name, stats))
        assert len(docs) == 5, name
        assert stats.skipped == {R_UTF8: 1, R_JSON: 1, R_NO_TEXT: 1}, name
    text = tmp_path / "plain.txt"
    text.write_bytes(b"first line here\n\xff\xfe broken\n\nsecond\n")
    stats = new_stats(text)
    assert list(iter_documents(text, stats)) == ["first line here", "second"]
    assert stats.skipped == {R_UTF8: 1}
    manifest = build_index([tmp_path / "c.jsonl.gz", text], [2], tmp_path / "idx", capacity=50)
    assert manifest["corpus"][0]["skipped"][R_UTF8] == 1
    assert manifest["corpus"][1]["documents"] == 2


def test_merge_and_extend_equal_one_build(tmp_path: Path):
    rng = np.random.default_rng(1)
    a, b = _docs(rng, 50), _docs(rng, 50)
    pa = _write_jsonl(tmp_path / "a.jsonl", a)
    pb = _write_jsonl(tmp_path / "b.jsonl", b)
    build_index([pa, pb], [4], tmp_path / "whole", capacity=5000, measure_fp=False)
    build_index([pa], [4], tmp_path / "sa", capacity=5000, measure_fp=False)
    build_index([pb], [4], tmp_path / "sb", capacity=5000, measure_fp=False)
    merged = merge_indexes([tmp_path / "sa", tmp_path / "sb"], tmp_path / "merged")
    assert merged["filters"]["4"]["n_inserted"] == 2 * 50 * 37
    extend_index(tmp_path / "sa", [pb], measure_fp=False)
    whole = (tmp_path / "whole" / "ngrams_4.bloom").read_bytes()
    assert (tmp_path / "merged" / "ngrams_4.bloom").read_bytes() == whole
    assert (tmp_path / "sa" / "ngrams_4.bloom").read_bytes() == whole
    build_index([pa], [4], tmp_path / "small", capacity=100, measure_fp=False)
    with pytest.raises(ConfigError, match="same-size filters"):
        merge_indexes([tmp_path / "sa", tmp_path / "small"], tmp_path / "bad")


def test_filter_keeps_members_and_low_overlap_nonmembers(tmp_path: Path):
    rng = np.random.default_rng(2)
    corpus = _docs(rng, 20)
    path = _write_jsonl(tmp_path / "c.jsonl", corpus)
    build_index([path], [5], tmp_path / "idx", capacity=2000)
    index = NgramIndex.open(tmp_path / "idx")
    fresh = _docs(np.random.default_rng(99), 3)
    samples = [
        Sample("m1", corpus[0], 1),
        Sample("n_copy", corpus[1], 0),  # overlap 1.0: removed
        Sample("n_fresh", fresh[0], 0),  # overlap ~0: kept
        Sample("n_short", "too short", 0),  # undefined: dropped by default
    ]
    kept, removed, summary = filter_by_overlap(samples, index, n=5, max_overlap=0.8)
    assert [s.id for s in kept] == ["m1", "n_fresh"]
    assert {r["id"]: r["reason"] for r in removed} == {"n_copy": R_ABOVE, "n_short": R_UNDEFINED}
    assert summary["removed"] == {R_ABOVE: 1, R_UNDEFINED: 1}
    kept, _, _ = filter_by_overlap(samples, index, n=5, max_overlap=0.8, undefined="keep")
    assert [s.id for s in kept] == ["m1", "n_fresh", "n_short"]


def test_cli_build_score_filter(tmp_path: Path):
    rng = np.random.default_rng(3)
    corpus = _docs(rng, 30)
    path = _write_jsonl(tmp_path / "c.jsonl", corpus)
    data = tmp_path / "cands.jsonl"
    rows = [{"text": corpus[i], "label": 1} for i in range(5)]
    rows += [{"text": d, "label": 0} for d in _docs(np.random.default_rng(5), 5)]
    rows += [{"text": corpus[6], "label": 0}, {"text": "tiny", "label": 0}]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    runner = CliRunner()
    idx = tmp_path / "idx"
    half = _write_jsonl(tmp_path / "c2.jsonl", corpus[15:])
    _write_jsonl(path, corpus[:15])
    result = runner.invoke(
        diagnostics_app,
        ["overlap", "build", "--corpus", str(path), str(half), "--n", "7", "--n", "4",
         "--out", str(idx)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert [c["documents"] for c in NgramIndex.open(idx).manifest["corpus"]] == [15, 15]
    out = tmp_path / "scores.jsonl"
    result = runner.invoke(
        diagnostics_app,
        ["overlap", "score", "--index", str(idx), "--data", str(data), "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    scored = [json.loads(line) for line in out.read_text().splitlines()]
    assert scored[0]["overlap_7"] == 1.0 and scored[-1]["overlap_7"] is None
    summary = json.loads((tmp_path / "scores.summary.json").read_text())
    assert summary["n"]["7"]["undefined"] == 1
    assert summary["n"]["7"]["mean"]["members"] == 1.0
    assert (tmp_path / "scores.png").stat().st_size > 0
    result = runner.invoke(
        diagnostics_app,
        ["overlap", "score", "--index", str(idx), "--data", str(data), "--n", "13"],
    )
    assert result.exit_code == 2 and "built for n=[4, 7]" in result.output.replace("\n", "")
    filtered = tmp_path / "filtered.jsonl"
    result = runner.invoke(
        diagnostics_app,
        ["data", "filter", "--data", str(data), "--index", str(idx), "--out", str(filtered),
         "--n", "7", "--max-overlap", "0.2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert len(filtered.read_text().splitlines()) == 10
    manifest = json.loads((tmp_path / "filtered.jsonl.manifest.json").read_text())
    assert manifest["removed"] == {R_ABOVE: 1, R_UNDEFINED: 1}
