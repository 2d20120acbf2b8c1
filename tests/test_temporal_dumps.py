"""Reading dated dumps: JSONL with a date field and MediaWiki XML exports (streamed)."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest
from temporal_fixtures import Page, write_export, write_jsonl

from imprint.data.dumps import (
    R_BAD_DATE,
    R_BAD_ROW,
    R_EMPTY,
    R_NOT_ARTICLE,
    R_REDIRECT,
    R_UNDATED_REVISION,
    dump_format,
    parse_date,
    read_dump,
    wikitext_to_plain,
)
from imprint.errors import ConfigError, DataError


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2023-02-18", utc(2023, 2, 18)),
        ("2023-02-18T12:34:56Z", utc(2023, 2, 18, 12, 34, 56)),
        ("2023-02-18T01:00:00+02:00", utc(2023, 2, 17, 23)),  # crosses midnight in UTC
        ("2023-02-18 12:00", utc(2023, 2, 18, 12)),  # no offset: UTC
        (" 20230218 ", utc(2023, 2, 18)),
    ],
)
def test_parse_date_reads_iso_forms_in_utc(text: str, expected: datetime) -> None:
    assert parse_date(text, where="x") == expected


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ("2023-02", "partial date"),
        ("2023", "partial date"),
        ("2023-02-30", "day is out of range"),
        ("18/02/2023", "ISO 8601"),
        ("", "ISO 8601"),
        (1676678400, "a number"),
        (True, "true or false"),
        (["2023-02-18"], "a list"),
    ],
)
def test_parse_date_refuses_what_it_would_have_to_guess(value: object, hint: str) -> None:
    with pytest.raises(DataError) as err:
        parse_date(value, where="dump.jsonl line 7")
    assert "dump.jsonl line 7" in str(err.value)
    assert repr(value) in str(err.value) and hint in str(err.value)


def test_a_null_date_is_called_missing_not_a_number() -> None:
    with pytest.raises(DataError) as err:
        parse_date(None, where="dump.jsonl line 7")
    message = str(err.value)
    assert "dump.jsonl line 7" in message and "null" in message and "no date" in message
    assert "number" not in message and "NoneType" not in message


def test_dump_format_by_suffix(tmp_path: Path) -> None:
    assert dump_format(Path("a.xml.bz2")) == "mediawiki"
    assert dump_format(Path("a.jsonl.gz")) == "jsonl"
    assert dump_format(Path("a.txt"), "jsonl") == "jsonl"
    with pytest.raises(ConfigError, match="--format jsonl"):
        dump_format(Path("dump.txt"))


def test_jsonl_reader_reads_fields_non_latin_and_counts_empty(tmp_path: Path) -> None:
    rows = [
        {"when": "2019-05-01", "body": "Зимний дворец в Санкт-Петербурге", "key": 1},
        {"when": "2021-01-01T00:00:00+09:00", "body": "東京都の人口は増え続けている", "key": 2},
        {"when": "2022-03-03", "body": "   ", "key": 3},
    ]
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    dropped: Counter[str] = Counter()
    docs = list(
        read_dump(path, date_field="when", text_field="body", id_field="key", dropped=dropped)
    )
    assert [d.id for d in docs] == ["1", "2"]
    assert docs[1].text == rows[1]["body"] and docs[1].date == utc(2020, 12, 31, 15)
    assert docs[0].source.endswith("d.jsonl line 1")
    assert dropped == {R_EMPTY: 1}


def test_jsonl_bad_date_names_the_line_and_value_or_is_counted(tmp_path: Path) -> None:
    rows = [{"date": "2019-01-01", "text": "a b"}, {"date": "2019-01-02", "text": "c d"}]
    path = tmp_path / "d.jsonl"
    path.write_text(
        "".join(json.dumps(r) + "\n" for r in rows)
        + "\n"  # a blank line 3 is skipped
        + json.dumps({"date": "31/02/2023", "text": "x"})
        + "\n"
        + "{not json\n"
        + json.dumps({"text": "no date"})
        + "\n",
        "utf-8",
    )
    with pytest.raises(DataError) as err:
        list(read_dump(path, dropped=Counter()))
    assert "line 4" in str(err.value) and "'31/02/2023'" in str(err.value)
    assert "--on-bad skip" in str(err.value)
    dropped: Counter[str] = Counter()
    docs = list(read_dump(path, on_bad="skip", dropped=dropped))
    assert len(docs) == 2
    assert dropped == {R_BAD_DATE: 1, R_BAD_ROW: 2}


def test_jsonl_missing_field_lists_the_fields_there(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", [{"created": "2019-01-01", "text": "a"}])
    with pytest.raises(
        DataError, match=r"line 1 has no field 'date' \(its fields: created, text\)"
    ):
        list(read_dump(path, dropped=Counter()))


def test_jsonl_lone_surrogate_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"date": "2019-01-01", "text": "bad \\ud83d here"}\n', "utf-8")
    with pytest.raises(DataError, match="line 1.*surrogate"):
        list(read_dump(path, dropped=Counter()))


def test_wikitext_to_plain_keeps_prose_only() -> None:
    wikitext = (
        "{{Infobox city|name=Kraków}}'''Kraków''' jest [[miasto|miastem]] w [[Polska|Polsce]]."
        "<ref name=a>Źródło [[x]]</ref> [[Plik:Wawel.jpg|thumb|Wawel [[zamek]]]]"
        "[[Kategorie:Miasta]] [[Category:Cities]]\n== Historia ==\nZałożone w '''X''' wieku."
        '\n{| class="wikitable"\n|-\n| a || b\n|}\n<!-- hidden -->&amp; koniec'
    )
    plain = wikitext_to_plain(wikitext, hidden_namespaces=frozenset({"plik", "kategorie"}))
    assert plain == "Kraków jest miastem w Polsce. Założone w X wieku. & koniec"


def _pages() -> list[Page]:
    return [
        Page(
            "Kraków",
            [  # revisions out of order: the earliest dates the page
                (
                    "2021-05-01T10:00:00Z",
                    "'''Kraków''' jest [[miasto|miastem]] w Polsce. [[Plik:a.jpg|thumb|x]]",
                ),
                ("2019-01-01T00:00:00Z", "Kraków – pierwsza wersja."),
            ],
            page_id=7,
        ),
        Page("大阪", [("2023-03-03T03:03:03Z", "大阪は日本の都市である。")], page_id=8),
        Page("القاهرة", [("2022-01-01T00:00:00Z", "القاهرة هي عاصمة مصر.")], page_id=9),
        Page(
            "Old name",
            [("2020-01-01T00:00:00Z", "#REDIRECT [[Kraków]]")],
            page_id=10,
            redirect="Kraków",
        ),
        Page("Talk:Kraków", [("2020-01-01T00:00:00Z", "a talk page")], ns=1, page_id=11),
        Page("Hidden redirect", [("2020-01-01T00:00:00Z", "#redirect [[X]]")], page_id=12),
    ]


@pytest.mark.parametrize("suffix", [".xml", ".xml.gz", ".xml.bz2"])
def test_mediawiki_pages_dated_by_earliest_revision(tmp_path: Path, suffix: str) -> None:
    path = write_export(tmp_path / f"export{suffix}", _pages(), file_ns="Plik")
    dropped: Counter[str] = Counter()
    docs = list(read_dump(path, dropped=dropped))
    assert [d.id for d in docs] == ["7", "8", "9"]
    krakow = docs[0]
    assert krakow.date == utc(2019, 1, 1) and krakow.revisions == 2
    assert krakow.text == "Kraków jest miastem w Polsce."  # latest revision, markup stripped
    assert krakow.source == "page 'Kraków'"
    assert docs[1].text == "大阪は日本の都市である。" and docs[2].text == "القاهرة هي عاصمة مصر."
    assert dropped == {R_REDIRECT: 2, R_NOT_ARTICLE: 1}
    first = list(read_dump(path, revision="first", dropped=Counter()))
    assert first[0].text == "Kraków – pierwsza wersja." and first[0].date == utc(2019, 1, 1)
    raw = list(read_dump(path, markup="keep", dropped=Counter()))
    assert "[[miasto|miastem]]" in raw[0].text


def test_mediawiki_bad_timestamp_names_line_and_page(tmp_path: Path) -> None:
    pages = [
        Page("Fine", [("2019-01-01T00:00:00Z", "fine text")], page_id=1),
        Page("Broken", [("2019-13-01T00:00:00Z", "x"), ("2018-01-01T00:00:00Z", "y")], page_id=2),
    ]
    path = write_export(tmp_path / "e.xml", pages)
    lines = path.read_text("utf-8").splitlines()
    bad_line = next(i for i, line in enumerate(lines, 1) if "2019-13-01" in line)
    with pytest.raises(DataError) as err:
        list(read_dump(path, dropped=Counter()))
    message = str(err.value)
    assert f"line {bad_line}," in message and "'2019-13-01T00:00:00Z'" in message
    assert "page 'Broken'" in message
    dropped: Counter[str] = Counter()
    docs = list(read_dump(path, on_bad="skip", dropped=dropped))
    assert [d.date for d in docs] == [utc(2019, 1, 1), utc(2018, 1, 1)]
    assert dropped == {R_UNDATED_REVISION: 1}


def test_mediawiki_malformed_xml_is_a_data_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.xml"
    path.write_text("<mediawiki><page><title>x</title></mediawiki>", "utf-8")
    with pytest.raises(DataError, match="bad.xml line 1: not well-formed XML"):
        list(read_dump(path, dropped=Counter()))


def test_mediawiki_reader_streams(tmp_path: Path) -> None:
    """The first page comes out after reading a sliver of a large export: nothing waits for
    the whole file, and each page's revisions are let go once read."""
    long_text = "word " * 2000
    pages = [
        Page(
            f"P{i}",
            [(f"2019-01-{1 + r:02d}T00:00:00Z", long_text) for r in range(5)],
            page_id=i + 1,
        )
        for i in range(300)
    ]
    path = write_export(tmp_path / "big.xml", pages)
    seen: list[int] = []
    docs = read_dump(path, markup="keep", dropped=Counter(), advance=seen.append)
    first = next(docs)
    assert first.id == "1" and first.revisions == 5
    assert 0 < sum(seen) < path.stat().st_size / 50
    assert sum(1 for _ in docs) == 299
    assert sum(seen) == path.stat().st_size


def test_jsonl_dump_reads_through_gzip_and_bzip2(tmp_path: Path) -> None:
    import bz2
    import gzip

    rows = [{"date": "2019-01-01", "text": "пример текста"}, {"date": "2022-01-01", "text": "b"}]
    plain = write_jsonl(tmp_path / "d.jsonl", rows).read_bytes()
    (tmp_path / "d.jsonl.gz").write_bytes(gzip.compress(plain))
    (tmp_path / "d.jsonl.bz2").write_bytes(bz2.compress(plain))
    for name in ("d.jsonl.gz", "d.jsonl.bz2"):
        seen: list[int] = []
        path = tmp_path / name
        docs = list(read_dump(path, dropped=Counter(), advance=seen.append))
        assert [d.text for d in docs] == ["пример текста", "b"]
        assert sum(seen) == path.stat().st_size  # progress counts the compressed file
