"""Versioned outputs (issue 35): metrics.json, a run's manifest.json and every output folder's
marker carry ``format_version`` and validate against the JSON Schemas shipped in the package
(imprint/schemas, package data); the schemas list the same warning kinds and folder kinds as the
code; older files read, a newer major version is refused saying which version it needs."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import jsonschema
import pytest
from jsonschema import Draft202012Validator

from imprint.errors import DataError
from imprint.evaluation import RunMetrics, read_metrics
from imprint.evaluation.results import WARNING_KINDS
from imprint.formats import FORMAT_VERSION, SCHEMAS, check_format, schema
from imprint.outdir import KINDS, MARKER, mark_output
from imprint.report.writer import to_jsonable

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_each_schema_is_a_valid_draft_2020_12_schema(name: str) -> None:
    Draft202012Validator.check_schema(schema(name))
    assert schema(name)["properties"]["format_version"]["pattern"].startswith(
        f"^{FORMAT_VERSION.split('.')[0]}\\."
    )


def test_the_schemas_name_what_the_code_knows() -> None:
    warning_kinds = schema("metrics")["properties"]["warning_kinds"]["items"]["enum"]
    assert tuple(warning_kinds) == WARNING_KINDS
    assert tuple(schema("marker")["properties"]["kind"]["enum"]) == tuple(KINDS)


def test_the_schemas_ship_as_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "schemas/*.json" in config["tool"]["setuptools"]["package-data"]["imprint"]
    shipped = sorted(p.name for p in (ROOT / "src" / "imprint" / "schemas").glob("*.json"))
    assert shipped == sorted(f"{name}.schema.json" for name in SCHEMAS)


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_folder_marker_is_versioned_and_valid(kind: str, tmp_path: Path) -> None:
    mark_output(tmp_path, kind)
    marker = json.loads((tmp_path / MARKER).read_text())
    assert marker == {"format_version": FORMAT_VERSION, "kind": kind}
    jsonschema.validate(marker, schema("marker"))


def test_a_real_run_writes_files_the_schemas_accept(tiny_model_dir, tmp_path) -> None:
    """A run with the blind suite and a breakdown (the optional parts of metrics.json)."""
    from imprint.run import RunConfig, execute_run

    rows = [{"id": f"{y}-{i}", "label": y, "topic": "ab"[i % 2],
             "text": f"{'old' if y else 'new'} story {i} of the town by the sea"}
            for y in (1, 0) for i in range(10)]  # fmt: skip
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = RunConfig(model=str(tiny_model_dir), data=str(data), out=tmp_path / "run",
                       attacks="loss", n_bootstrap=20, shot_holdout=0, breakdown="topic",
                       progress=False, shared_args={"device": "cpu"})  # fmt: skip
    out = execute_run(config).out
    metrics = json.loads((out / "metrics.json").read_text())
    manifest = json.loads((out / "manifest.json").read_text())
    assert next(iter(metrics)) == "format_version" == next(iter(manifest))  # first, to be seen
    assert metrics["format_version"] == manifest["format_version"] == FORMAT_VERSION
    assert "blind_suite" in metrics and "breakdown" in metrics
    jsonschema.validate(metrics, schema("metrics"))
    jsonschema.validate(manifest, schema("manifest"))
    jsonschema.validate(json.loads((out / MARKER).read_text()), schema("marker"))
    broken = {**metrics, "attacks": {"loss": {**metrics["attacks"]["loss"], "auc": 0.7}}}
    with pytest.raises(jsonschema.ValidationError):  # the schema checks, not only parses
        jsonschema.validate(broken, schema("metrics"))


@pytest.mark.parametrize("name", ["metrics_head_sequence.json", "metrics_head_document.json"])
def test_stored_unversioned_metrics_read_and_rewrite_versioned(name: str) -> None:
    """Files written before versions (a sequence and a document run) read as they are; written
    again they carry the version and validate (documents, comparisons: every part)."""
    stored = json.loads((FIXTURES / name).read_text())
    assert "format_version" not in stored and check_format(stored, name) is None
    rewritten = to_jsonable(read_metrics(FIXTURES / name).to_dict())
    assert rewritten == {"format_version": FORMAT_VERSION, **stored}
    jsonschema.validate(rewritten, schema("metrics"))


def test_a_newer_major_version_is_refused_with_the_version_it_needs(tmp_path: Path) -> None:
    stored = json.loads((FIXTURES / "metrics_head_sequence.json").read_text())
    file = tmp_path / "metrics.json"
    file.write_text(json.dumps({**stored, "format_version": "3.1"}))
    with pytest.raises(DataError, match=r"format_version 3\.1, written by a newer imprint; this "
                       r"imprint \(.*\) reads format 1\.x .* reads format 3\.x"):  # fmt: skip
        read_metrics(file)
    with pytest.raises(DataError, match="format_version 3.1"):
        RunMetrics.from_dict({**stored, "format_version": "3.1"})
    assert RunMetrics.from_dict({**stored, "format_version": "1.9"}).attacks  # a newer minor
    with pytest.raises(DataError, match="is not MAJOR.MINOR"):
        check_format({"format_version": 1}, "metrics.json")


def test_the_docs_show_the_schemas_as_shipped() -> None:
    import sys

    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    from imprint_docs import on_page_markdown

    page = (ROOT / "docs" / "reference" / "report.md").read_text(encoding="utf-8")
    assert "<!-- imprint:schemas -->" in page
    rendered = on_page_markdown(page)
    for name in SCHEMAS:
        assert json.dumps(schema(name), indent=2) in rendered
