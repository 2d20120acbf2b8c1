"""Issue 24, terminal: piped output keeps full names uncut; listings in json, md and tsv."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from imprint.cli import app


def _invoke(*args: str):
    result = CliRunner().invoke(app, list(args))  # a captured stream: not a terminal
    assert result.exit_code == 0, result.output
    return result.output


def test_piped_listing_keeps_every_name_whole():
    out = _invoke("attacks")
    names = [line.split()[0] for line in out.splitlines() if line and not line[0].isspace()]
    assert "tfidf_logreg" in out or "con_recall" in names
    assert not any(name.endswith("…") for name in names)
    assert "…" not in out


def test_piped_datasets_listing_at_80_columns_stays_short():
    result = CliRunner().invoke(app, ["datasets", "wikimia"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert "…" not in out and "wikimia:32 " in out
    # one row per name at most a few lines high, not a caveat folded over dozens of lines
    assert len(out.splitlines()) < 80, len(out.splitlines())


def test_attacks_as_json_md_tsv():
    rows = json.loads(_invoke("attacks", "--format", "json"))
    by_name = {r["name"]: r for r in rows}
    assert by_name["loss"]["access"] and by_name["recall"]["paper"].startswith("Xie")
    tsv = _invoke("attacks", "--format", "tsv").splitlines()
    assert tsv[0].split("\t")[:3] == ["name", "access", "summary"]
    assert len(tsv) == len(rows) + 1 and all(line.count("\t") == 6 for line in tsv)
    md = _invoke("attacks", "--format", "md").splitlines()
    assert md[0].startswith("| name | access |") and md[1].startswith("|---|")
    assert len(md) == len(rows) + 2


def test_backends_and_datasets_as_tsv_and_json():
    tsv = _invoke("backends", "--format", "tsv").splitlines()
    assert tsv[0].startswith("name\tkind\tcapabilities")
    assert any(line.startswith("hf\tprovider\t") for line in tsv)
    assert any(line.startswith("smollm2-135m\talias\t") for line in tsv)
    data = json.loads(_invoke("datasets", "wikimia", "--format", "json"))
    assert any(d["name"] == "wikimia:32" for d in data)
    rows = _invoke("datasets", "wikimia", "--format", "tsv").splitlines()
    assert rows[0].split("\t")[0] == "name" and len(rows) == len(data) + 1


def test_an_unknown_format_is_a_one_line_usage_error():
    result = CliRunner().invoke(app, ["attacks", "--format", "xml"])
    assert result.exit_code == 2
    assert "xml" in result.output and "json" in result.output
