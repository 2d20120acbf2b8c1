"""The temporal builder: date windows (plain and RDD), de-duplication, buckets, balance,
manifest and files, on synthetic dumps written here (non-Latin texts, odd dates, copies)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporal_fixtures import Page, words, write_export, write_jsonl

from imprint.data.benchmarks import resolve_data
from imprint.data.sample import MEMBER, NON_MEMBER
from imprint.data.temporal import (
    R_EXACT,
    R_GAP,
    R_NORMAL,
    R_WINDOW,
    DrawOptions,
    collect,
    draw,
    make_design,
    normalise,
    truncate_units,
)
from imprint.data.temporal_build import ReadOptions, build_temporal, manifest, write_temporal
from imprint.data.words import split_units
from imprint.errors import ConfigError, DataError

BEFORE = datetime(2020, 1, 1, tzinfo=UTC)
AFTER = datetime(2021, 1, 1, tzinfo=UTC)
CHINESE = "北京是中华人民共和国的首都也是全国的政治文化中心城市历史悠久" * 12  # 360 characters


def _long(n: int, tag: str, i: int) -> str:
    """A text of ``n`` words; some in Cyrillic or Arabic script, or Chinese with no spaces."""
    if tag.endswith("zh"):
        return f"{tag}{i}号" + CHINESE[: n - 2]  # "mzh0" is one word, each character one more
    script = {"ru": "слово", "ar": "كلمة"}.get(tag[-2:], "")
    return words(n, tag + script, i)


def _rows() -> list[dict]:
    rows = []
    lengths = {
        "m": [300] * 10 + [150] * 10 + [70] * 10 + [40] * 10,
        "n": [300] * 12 + [150] * 8 + [70] * 15 + [40] * 5,
    }
    for side, sizes in lengths.items():
        for i, n in enumerate(sizes):
            year = 2018 + i % 2 if side == "m" else 2021 + i % 3
            tag = side + ("zh" if i in (0, 1) else "ru" if i == 2 else "ar" if i == 3 else "")
            rows.append(
                {
                    "id": f"{side}{i}",
                    "date": f"{year}-0{1 + i % 9}-1{i % 10}",
                    "text": _long(n, tag, i),
                }
            )
    m0, n5 = rows[0]["text"], rows[45]["text"]
    rows += [
        {"id": "m0-copy", "date": "2019-06-01T12:00:00Z", "text": m0},  # exact, same side
        {"id": "m1-copy", "date": "2019-07-01", "text": rows[1]["text"]},  # exact, same side
        # a case/punctuation variant of member m4 dated as a non-member: published earlier
        {"id": "m4-variant", "date": "2022-01-01", "text": rows[4]["text"].upper() + " !!"},
        # non-member n5's text already existed in the gap (earliest copy wins): n5 dropped
        {"id": "n5-early", "date": "2020-06-01", "text": n5},
        {"id": "gap1", "date": "2020-03-01", "text": words(300, "gap", 1)},
        {"id": "gap2", "date": "2020-12-31T23:59:59Z", "text": words(300, "gap", 2)},
        # odd offsets: 2019-12-31T23:30-01:00 is 2020-01-01T00:30Z (gap); the other is a member
        {"id": "tz-gap", "date": "2019-12-31T23:30:00-01:00", "text": words(300, "tz", 1)},
        {"id": "tz-member", "date": "2020-01-01T00:30:00+01:00", "text": words(300, "tz", 2)},
        {"id": "empty", "date": "2019-01-01", "text": " \n "},
    ]
    return rows


@pytest.fixture
def dump(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "dump.jsonl", _rows())


def _plain():
    return make_design(member_before=BEFORE, nonmember_after=AFTER)


def test_plain_build_balances_buckets_dedupes_and_honours_dates(dump: Path) -> None:
    built = build_temporal(dump, _plain(), DrawOptions(), read=ReadOptions(id_field="id"))
    c = built.collected
    assert built.read_dropped == {"empty text": 1}
    assert c.n_read == len(_rows()) - 1
    # windows and dedupe: every document read is accounted for once
    assert c.dropped[0] == {R_GAP: 4, R_EXACT: 3, R_NORMAL: 1}
    assert c.earlier_copies[0] == 2  # m4-variant and n5: their text is dated earlier
    assert len(c.candidates) + sum(c.dropped[0].values()) == c.n_read
    assert {x.id for x in c.candidates}.isdisjoint({"m0-copy", "m1-copy", "m4-variant", "n5"})
    per_side = {b.words: len(b.rows) // 2 for b in built.buckets}
    # members 41/31/21/11 at >= 32/64/128/256 words (tz-member adds one of 300), non-members
    # 39/34/19/11 (n5 dropped): the smaller side sets each bucket
    assert per_side == {32: 39, 64: 31, 128: 19, 256: 11}
    originals = {r["id"]: r["text"] for r in _rows()}
    for b in built.buckets:
        labels = [r.label for r in b.rows]
        assert labels.count(MEMBER) == labels.count(NON_MEMBER) == per_side[b.words]
        assert sum(b.available.values()) == sum(b.dropped.values()) - b.dropped.get(
            f"shorter than {b.words} words", 0
        ) + len(b.rows)
        assert len(b.rows) + sum(b.dropped.values()) == len(c.candidates)
        for r in b.rows:
            assert len(split_units(r.text)) == b.words
            assert originals[r.id].lstrip().startswith(r.text)
            assert (r.date < BEFORE) if r.label == MEMBER else (r.date >= AFTER)
    zh = next(r for r in built.buckets[0].rows if r.id == "m0")
    assert zh.text == "mzh0号" + CHINESE[:30] and " " not in zh.text  # 32 words, no space added


def test_written_buckets_load_as_wikimia_and_manifest_counts(dump: Path, tmp_path: Path) -> None:
    built = build_temporal(dump, _plain(), DrawOptions(seed=3), read=ReadOptions(id_field="id"))
    out = tmp_path / "set"
    path = write_temporal(built, out, blind={"design": {32: {"auc": 0.5}}})
    saved = json.loads(path.read_text("utf-8"))
    assert saved == json.loads(json.dumps(manifest(built, {"design": {32: {"auc": 0.5}}})))
    assert saved["seed"] == 3 and saved["design"]["design"] == "plain"
    assert saved["read"] == {
        "documents": len(_rows()) - 1,
        "dates": saved["read"]["dates"],
        "dropped": {"empty text": 1},
        "duplicate_ids": 0,
    }
    assert saved["candidates"]["members"] == 41 and saved["candidates"]["nonmembers"] == 39
    assert saved["candidates"]["member_dates"][1] < "2020-01-01"
    assert saved["candidates"]["nonmember_dates"][0] >= "2021-01-01"
    assert saved["buckets"]["32"]["blind"] == {"auc": 0.5}
    drawn = [json.loads(line) for line in (out / "drawn.jsonl").read_text("utf-8").splitlines()]
    for words_, entry in saved["buckets"].items():
        loaded = resolve_data(str(out / entry["file"]))  # what `imprint run --data` reads
        labels = [s.label for s in loaded.samples]
        assert labels.count(1) == labels.count(0) == entry["members"] == entry["nonmembers"]
        assert sum(int(words_) in d["buckets"] for d in drawn) == len(labels)
    text = (out / "wikimia_32.jsonl").read_text("utf-8")
    assert "北京" in text and set(json.loads(text.splitlines()[0])) == {"input", "label"}


def test_truncation_duplicates_are_dropped_per_bucket() -> None:
    from imprint.data.dumps import DatedDoc

    shared = words(40, "same", 0)
    docs = [
        DatedDoc("a", shared + " " + words(30, "tailA", 0), datetime(2019, 1, 1, tzinfo=UTC), "a"),
        DatedDoc("b", shared + " " + words(30, "tailB", 0), datetime(2018, 1, 1, tzinfo=UTC), "b"),
        DatedDoc("c", words(70, "other", 0), datetime(2022, 1, 1, tzinfo=UTC), "c"),
        DatedDoc("d", words(70, "other", 1), datetime(2022, 1, 2, tzinfo=UTC), "d"),
    ]
    c = collect(docs, [_plain()], max_words=64)
    buckets, skipped = draw(c, 0, DrawOptions(buckets=(32, 64)))
    b32, b64 = buckets
    assert b32.dropped["same first 32 words as an earlier-dated text"] == 1
    assert [r.id for r in b32.rows if r.label == MEMBER] == ["b"]  # the earlier-dated one
    assert len(b64.rows) == 4 and not skipped


def test_normalise_and_truncate_units() -> None:
    assert normalise("  Ｈｅｌｌｏ,\tWORLD!! ") == normalise("hello world") == "hello world"
    assert normalise("Straße") == normalise("STRASSE")
    assert truncate_units("  a b\n c  d ", 3) == ("a b\n c", 3)
    assert truncate_units("短い文です", 3) == ("短い文", 3)
    assert truncate_units("", 3) == ("", 0)


def test_rdd_window_edges_and_collect(tmp_path: Path) -> None:
    cutoff = datetime(2020, 7, 1, tzinfo=UTC)
    design = make_design(
        member_before=None, nonmember_after=None, design="rdd", cutoff=cutoff, bandwidth_days=10
    )
    bw, tick = timedelta(days=10), timedelta(microseconds=1)
    assert design.label(cutoff - bw) == MEMBER
    assert design.label(cutoff - bw - tick) == R_WINDOW
    assert design.label(cutoff - tick) == MEMBER
    assert design.label(cutoff) == NON_MEMBER
    assert design.label(cutoff + bw) == NON_MEMBER
    assert design.label(cutoff + bw + tick) == R_WINDOW
    rows = [
        {"id": str(i), "date": (cutoff + timedelta(days=d)).isoformat(), "text": words(40, "w", i)}
        for i, d in enumerate(range(-30, 31))
    ]
    built = build_temporal(
        write_jsonl(tmp_path / "d.jsonl", rows),
        design,
        DrawOptions(buckets=(32,)),
        read=ReadOptions(id_field="id"),
    )
    (b,) = built.buckets
    members = sorted((r.date - cutoff).days for r in b.rows if r.label == MEMBER)
    nonmembers = sorted((r.date - cutoff).days for r in b.rows if r.label == NON_MEMBER)
    assert members == list(range(-10, 0))  # both edges of [cutoff - 10 d, cutoff)
    assert len(nonmembers) == 10 and set(nonmembers) < set(range(0, 11))  # 11 in [0, 10], 10 drawn
    assert b.dropped == {"not drawn (balance: 10 per side)": 1}
    assert built.collected.dropped[0] == {R_WINDOW: 40}
    # the plain design drawn from the same dump for comparison takes every date
    assert built.plain is not None and len(built.plain[0][0].rows) == 2 * 30


def test_design_errors_teach() -> None:
    with pytest.raises(ConfigError, match="later than --nonmember-after"):
        make_design(member_before=AFTER, nonmember_after=BEFORE)
    with pytest.raises(ConfigError, match="needs --cutoff DATE and --bandwidth DAYS"):
        make_design(member_before=BEFORE, nonmember_after=AFTER, design="rdd")
    with pytest.raises(ConfigError, match="positive number of days"):
        make_design(
            member_before=None, nonmember_after=None, design="rdd", cutoff=BEFORE, bandwidth_days=0
        )
    for cutoff, match in (((2022, 1, 1), "must lie between"), ((2020, 6, 1), "leaves no room")):
        with pytest.raises(ConfigError, match=match):
            make_design(
                member_before=BEFORE,
                nonmember_after=AFTER,
                design="rdd",
                cutoff=datetime(*cutoff, tzinfo=UTC),
                bandwidth_days=30,
            )
    with pytest.raises(ConfigError, match="belong to --design rdd"):
        make_design(member_before=BEFORE, nonmember_after=AFTER, cutoff=BEFORE)
    with pytest.raises(ConfigError, match="give --member-before"):
        make_design(member_before=None, nonmember_after=AFTER)
    with pytest.raises(ConfigError, match="distinct positive word counts"):
        DrawOptions(buckets=(32, 32))


def test_no_documents_on_one_side_names_the_dates_found(tmp_path: Path) -> None:
    rows = [{"date": f"201{i}-05-05", "text": words(40, "x", i)} for i in range(5, 10)]
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    with pytest.raises(DataError) as err:
        build_temporal(path, _plain(), DrawOptions(buckets=(32,)))
    message = str(err.value)
    assert "no non-members" in message and "from 2021-01-01" in message
    assert "5 documents read are dated 2015-05-05 to 2019-05-05" in message


def test_too_few_for_balance_says_counts(dump: Path, tmp_path: Path) -> None:
    with pytest.raises(
        DataError, match="256 words.*11 members and 11 non-members.*--per-label <= 11"
    ):
        build_temporal(dump, _plain(), DrawOptions(per_label=12))
    short = [
        {"date": "2019-01-01", "text": words(40, "m", 0)},
        {"date": "2022-01-01", "text": words(20, "n", 0)},
    ]
    with pytest.raises(DataError, match="1 members and 0 non-members have at least 32 words"):
        build_temporal(
            write_jsonl(tmp_path / "s.jsonl", short), _plain(), DrawOptions(buckets=(32,))
        )


def test_seeded_draw_is_reproducible(dump: Path) -> None:
    def ids(seed: int) -> list[str]:
        built = build_temporal(dump, _plain(), DrawOptions(buckets=(64,), per_label=10, seed=seed))
        return [r.id for r in built.buckets[0].rows]

    assert ids(1) == ids(1)
    assert ids(1) != ids(2)


def test_mediawiki_export_builds_with_single_revision_warning(tmp_path: Path) -> None:
    pages = [
        Page(
            f"Стр {i}",
            [
                (
                    f"{2018 + 4 * (i % 2)}-02-0{1 + i % 9}T00:00:00Z",
                    "'''Жирный''' " + words(40, "wiki", i) + " [[Категория:X]]",
                )
            ],
            page_id=i + 1,
        )
        for i in range(12)
    ]
    path = write_export(tmp_path / "w.xml.bz2", pages)
    built = build_temporal(path, _plain(), DrawOptions(buckets=(32,)))
    (b,) = built.buckets
    assert len(b.rows) == 12 and all(r.text.startswith("Жирный wiki") for r in b.rows)
    assert any("one revision in the export" in w for w in built.warnings)
    assert manifest(built)["read"]["pages_with_one_revision"] == 12


def test_read_options_are_checked() -> None:
    with pytest.raises(ConfigError, match="--revision 'newest' is not one of latest, first"):
        ReadOptions(revision="newest")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="--on-bad 'drop' is not one of error, skip"):
        ReadOptions(on_bad="drop")  # type: ignore[arg-type]


def test_duplicate_ids_are_counted_warned_and_in_the_manifest(tmp_path: Path) -> None:
    """Two documents with one id cannot be told apart in drawn.jsonl: counted and warned."""
    rows = [{"id": f"d{i}", "date": "2019-01-01", "text": words(40, "m", i)} for i in range(6)]
    rows += [{"id": f"d{i}", "date": "2022-01-01", "text": words(40, "n", i)} for i in range(4)]
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    built = build_temporal(
        path, _plain(), DrawOptions(buckets=(32,)), read=ReadOptions(id_field="id")
    )
    assert built.collected.duplicate_ids == 4
    (warning,) = [w for w in built.warnings if "share an id" in w]
    assert "4 document(s)" in warning and "'d0'" in warning and "line 1" in warning
    assert "line 7" in warning and "--id-field" in warning
    assert manifest(built)["read"]["duplicate_ids"] == 4
    # ids numbered by line never collide: no warning
    plain = build_temporal(path, _plain(), DrawOptions(buckets=(32,)))
    assert plain.collected.duplicate_ids == 0
    assert not [w for w in plain.warnings if "share an id" in w]


def test_a_bucket_shrunk_by_dedupe_says_why(tmp_path: Path) -> None:
    """8 identical members and 8 identical non-members leave 1 per side: the build says that
    de-duplication merged them, and that the bucket is too small for the blind baseline."""
    rows = [{"date": "2019-01-01", "text": words(40, "m", 0)}] * 8
    rows += [{"date": "2022-01-01", "text": words(40, "n", 0)}] * 8
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    built = build_temporal(path, _plain(), DrawOptions(buckets=(32,)))
    assert [len(b.rows) for b in built.buckets] == [2]
    (dedupe,) = [w for w in built.warnings if w.startswith("de-duplication")]
    assert "14 of the 16" in dedupe and "14 exact" in dedupe and "earliest" in dedupe
    (small,) = [w for w in built.warnings if w.startswith("bucket 32")]
    assert "1 text(s) per side" in small and "blind baseline" in small and "5 per side" in small


def test_a_side_emptied_by_dedupe_says_so_not_move_the_dates(tmp_path: Path) -> None:
    rows = [{"date": "2019-01-01", "text": words(40, "s", 0)}] * 4
    rows += [{"date": "2022-01-01", "text": words(40, "s", 0)}] * 4  # the same text, later
    with pytest.raises(DataError) as err:
        build_temporal(write_jsonl(tmp_path / "d.jsonl", rows), _plain(), DrawOptions((32,)))
    message = str(err.value)
    assert "no non-members" in message and "7 were copies of an earlier-dated text" in message
    assert "earliest copy" in message and "Move --member-before" not in message
