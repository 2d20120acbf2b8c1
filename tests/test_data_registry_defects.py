"""Defect checks when a set loads: counts on hand-made sets with known defects, overlap between a
benchmark's splits, and the counts in a real run's manifest and report warnings."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

import pytest

import imprint.data.benchmark_files as files_mod
from imprint.data import Sample, data_defects, resolve_data
from imprint.data.defects import check_defects, duplicate_counts, short_counts, split_overlap
from imprint.run import RunConfig, execute_run


def _s(i: int, text: str, label: int) -> Sample:
    return Sample(str(i), text, label)


def test_duplicate_counts_on_a_hand_made_set() -> None:
    cafe_nfc = unicodedata.normalize("NFC", "café au lait")
    cafe_nfd = unicodedata.normalize("NFD", "café au lait")
    samples = [
        _s(0, "alpha", 1),
        _s(1, "alpha", 1),  # 1 extra member copy
        _s(2, "beta", 1),
        _s(3, "gamma", 0),
        _s(4, "gamma", 0),
        _s(5, "gamma", 0),  # 2 extra non-member copies
        _s(6, "beta", 0),  # "beta" under both labels
        _s(7, "Hello   World", 1),
        _s(8, "hello world", 1),  # equal only after case/whitespace normalisation
        _s(9, cafe_nfc, 0),
        _s(10, cafe_nfd, 0),  # equal only after Unicode normalisation
        _s(11, "東京", 1),
        _s(12, "東京", 1),  # 1 more extra member copy, non-Latin
    ]
    extra, both, normalised = duplicate_counts(samples)
    assert extra == {"members": 2, "non-members": 2}
    assert both == 1
    assert normalised == 2
    report = check_defects(samples)
    assert report.total == 2 + 2 + 1 + 2
    messages = report.warnings("toy")
    assert len(messages) == 1
    assert "2 extra copies of equal texts among members" in messages[0]
    assert "1 texts labelled both member and non-member" in messages[0]
    assert report.to_dict()["texts_under_both_labels"] == 1


def test_clean_set_has_no_defects_and_no_warning() -> None:
    samples = [_s(i, f"text number {i}", i % 2) for i in range(10)]
    report = check_defects(samples, bucket_words=2)
    assert report.total == 0 and report.warnings("clean") == []


def test_short_texts_against_the_bucket() -> None:
    words = lambda n: " ".join(["word"] * n)  # noqa: E731
    samples = [
        _s(0, words(64), 1),
        _s(1, words(32), 1),  # exactly half: not short
        _s(2, words(31), 1),  # short
        _s(3, words(5), 0),  # short
        _s(4, "字" * 40, 0),  # 40 characters of an unspaced script: 40 words, not short
        _s(5, "Москва " * 10, 0),  # 10 words: short
    ]
    assert short_counts(samples, 64) == {"members": 1, "non-members": 2}
    report = check_defects(samples, bucket_words=64)
    assert report.short_threshold == 32
    (message,) = report.warnings("wikimia:64")
    assert "3 texts (1 members, 2 non-members) have fewer than 32 words" in message
    assert report.to_dict()["short_texts"] == {
        "bucket_words": 64,
        "below_words": 32,
        "members": 1,
        "non-members": 2,
    }


def test_split_overlap_same_and_cross_label() -> None:
    mine = [_s(0, "shared member", 1), _s(1, "flipped", 1), _s(2, "only here", 0)]
    other = [_s(0, "shared member", 1), _s(1, "flipped", 0), _s(2, "only there", 0)]
    o = split_overlap(mine, other, "other split")
    assert (o.same_label, o.cross_label, o.defects) == (1, 1, 1)
    held_out = split_overlap(mine, other, "test", disjoint_expected=True)
    assert held_out.defects == 2
    report = check_defects(mine, overlaps=[o])
    (message,) = report.warnings("this split")
    assert "shares 1 texts with the other label" in message and "other split" in message


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "data"
    monkeypatch.setattr(files_mod, "data_dirs", lambda: [folder])
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return folder


def _mimir(root: Path, stem: str, members: list[str], nonmembers: list[str]) -> None:
    for folder, texts in (("train", members), ("test", nonmembers)):
        path = root / "mimir" / "cache_100_200_1000_512" / folder / f"{stem}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(t) + "\n" for t in texts), "utf-8")


def test_benchmark_split_overlap_checks_present_siblings_only(data_dir: Path) -> None:
    _mimir(data_dir, "arxiv_ngram_13_0.8", ["m1", "m2", "m2"], ["n1", "n2"])
    # a sibling split: m1 shared as a member, n1 a member there (contradiction)
    _mimir(data_dir, "arxiv_ngram_7_0.2", ["m1", "n1"], ["n9"])
    loaded = resolve_data("mimir:arxiv/ngram_13_0.8")
    report = data_defects("mimir:arxiv/ngram_13_0.8", loaded)
    by_other = {o.other: o for o in report.overlaps}
    assert by_other["mimir:arxiv/ngram_7_0.2"].same_label == 1
    assert by_other["mimir:arxiv/ngram_7_0.2"].cross_label == 1
    assert not by_other["mimir:arxiv/ngram_13_0.2"].checked  # not here: listed, not downloaded
    assert report.duplicates == {"members": 1, "non-members": 0}
    assert report.total == 1 + 1
    assert report.to_dict()["split_overlap"][1] == {
        "other": "mimir:arxiv/ngram_13_0.2",
        "checked": False,
        "note": "not present locally: not checked",
    }


def test_arxivmia_dev_test_leakage(data_dir: Path) -> None:
    for stem, rows in (
        ("arxiv_mia_dev", [("leaked abstract", 1), ("dev only", 0)]),
        ("arxiv_mia_test", [("leaked abstract", 1), ("test only", 0)]),
    ):
        path = data_dir / "arxivmia" / "data" / f"{stem}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows))
    report = data_defects("arxivmia:test", resolve_data("arxivmia:test"))
    (o,) = report.overlaps
    assert (o.other, o.same_label, o.defects) == ("arxivmia:dev", 1, 1)
    assert "leakage between held-out splits" in report.warnings("arxivmia:test")[0]


def test_wikimia_shared_copy_is_clean() -> None:
    """The real WikiMIA files: no duplicates or short texts in any bucket (a regression guard
    on the checks' false-positive rate with real text)."""
    for n in (32, 64, 128, 256):
        report = data_defects(f"wikimia:{n}", resolve_data(f"wikimia:{n}"))
        assert report.bucket_words == n
        assert report.to_dict()["short_texts"]["below_words"] == n // 2
        assert report.total == 0, report.to_dict()


def test_run_manifest_counts_defects_and_the_report_warns(
    tiny_model_dir: Path, tmp_path: Path, one_torch_thread: None
) -> None:
    rows = [{"text": f"Текст номер {i} 東京 {i}", "label": i % 2} for i in range(10)]
    rows += [rows[0], rows[1], {"text": rows[2]["text"], "label": 1}]  # 2 copies, 1 both-label
    data = tmp_path / "dup.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    config = RunConfig(
        model=str(tiny_model_dir),
        data=str(data),
        out=tmp_path / "run",
        attacks=("loss",),
        n_bootstrap=20,
        progress=False,
        blind=False,
        cache=tmp_path / "c.sqlite",
    )
    with pytest.warns(UserWarning, match="both member and non-member"):  # the run's own dedupe
        result = execute_run(config)
    defects = result.manifest["data"]["defects"]
    assert defects["duplicates_within_label"] == {"members": 1, "non-members": 1}
    assert defects["texts_under_both_labels"] == 1 and defects["total"] == 3
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["data"]["defects"] == defects
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert "data_defects" in metrics["warning_kinds"]
    message = metrics["warnings"][metrics["warning_kinds"].index("data_defects")]
    assert "duplicate texts in the set as published" in message
    assert "duplicate texts in the set as published" in (tmp_path / "run" / "report.md").read_text()
