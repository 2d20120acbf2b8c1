"""Training manifests whose ids do not fit the run (issue 19, items 9 and 15): ids that match no
sample are refused before any model work (they silently turned an IN sample into OUT), or
accepted with --allow-unmatched-ids and counted in the manifest and report; a manifest whose
'nonmembers: []' leaves every other sample unknown is refused for that reason, not for one it
does not have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import quiet_run
from reference_runs import logprob_rows, run_with_references

from imprint.attacks import RunContext, build_attacks
from imprint.data.sample import Sample
from imprint.errors import ConfigError
from imprint.training_manifest import ReferenceModel, ReferenceSet, check_reference_ids


def _data(tmp_path: Path, n: int = 6) -> tuple[Path, list[str]]:
    rows = [{"text": f"текст {i} words and more", "label": i % 2} for i in range(n)]
    data = tmp_path / "tiny.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return data, [f"tiny:{i + 1}" for i in range(n)]  # the run's ids: file stem and line


def test_ids_matching_no_sample_are_listed_and_counted():
    models = (
        ReferenceModel("r0", "s", frozenset({"a", "nosuch:99"}), frozenset({"b", "tiny:999"})),
        ReferenceModel("r1", "s", frozenset({"b", "nosuch:99", "z1", "z2", "z3", "z4"})),
    )
    refset = ReferenceSet(models, source="refs.yaml")
    assert refset.unmatched(["a", "b"]) == ["nosuch:99", "tiny:999", "z1", "z2", "z3", "z4"]
    with pytest.raises(ConfigError) as err:
        check_reference_ids(refset, ["a", "b"])
    message = str(err.value)
    assert "6 sample id(s)" in message and "'nosuch:99', 'tiny:999', 'z1'" in message
    assert "refs.yaml" in message and "--allow-unmatched-ids" in message and "z4" not in message
    record = check_reference_ids(refset, ["a", "b"], allow=True)
    assert record["unmatched_ids"] == 6 and record["unmatched_examples"][:2] == [
        "nosuch:99",
        "tiny:999",
    ]
    assert (
        check_reference_ids(refset, ["a", "b", "nosuch:99", "tiny:999", "z1", "z2", "z3", "z4"])[
            "unmatched_ids"
        ]
        == 0
    )


def test_cli_refuses_unmatched_ids_before_any_forward_pass(
    tmp_path: Path, tiny_model_dir: Path, tiny_ref_dir: Path
) -> None:
    data, ids = _data(tmp_path)
    manifest = tmp_path / "m.json"
    models = [
        {"spec": str(tiny_model_dir), "members": [*ids[:3], "nosuch:99"]},
        {"spec": str(tiny_ref_dir), "members": [*ids[3:], "tiny:999"]},
    ]
    manifest.write_text(json.dumps({"models": models}))
    result = run_with_references(tmp_path, tiny_model_dir, data, manifest)
    assert result.exit_code == 2, result.output
    assert "2 sample id(s)" in result.output and "'nosuch:99'" in result.output
    assert not (tmp_path / "out").exists()
    # was: lira/rmia ran to the end, the two ids silently ignored
    assert logprob_rows(tmp_path / "c.sqlite") == 0


def test_unmatched_ids_accepted_with_the_flag_are_in_the_manifest_and_report(
    tmp_path: Path, tiny_model_dir: Path, tiny_ref_dir: Path, one_torch_thread
) -> None:

    data, ids = _data(tmp_path)
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "models:\n"
        f"  - {{spec: {tiny_model_dir}, members: [{ids[0]}, {ids[1]}, {ids[2]}, nosuch:99]}}\n"
        f"  - {{spec: {tiny_ref_dir}, members: [{ids[3]}, {ids[4]}, {ids[5]}]}}\n",
        encoding="utf-8",
    )
    result = quiet_run(
        tiny_model_dir,
        data,
        tmp_path / "run",
        attacks=("loss", "rmia"),
        references=str(manifest),
        allow_unmatched_ids=True,
        params={"rmia": {"a": 0.5}},
        cache=tmp_path / "c.sqlite",
        n_bootstrap=10,
    )
    record = result.manifest["references"]
    assert record["unmatched_ids"] == 1 and record["unmatched_examples"] == ["nosuch:99"]
    assert record["source"] == str(manifest)
    warnings = [w for w in result.metrics.warnings if w.kind == "unmatched_reference_ids"]
    assert len(warnings) == 1 and "nosuch:99" in warnings[0].message
    report = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert "nosuch:99" in report


def test_empty_nonmembers_leave_the_rest_unknown_and_the_error_says_so():
    """Issue 19 item 15: 10 of 20 samples IN, 'nonmembers: []': the other 10 are unknown, not
    IN; the refusal said every model trained on every one of the 20 samples."""
    samples = [Sample(f"s{i}", f"text {i}", i % 2) for i in range(20)]
    members = frozenset(f"s{i}" for i in range(10))
    models = tuple(ReferenceModel(f"r{i}", "s", members, frozenset()) for i in range(2))
    run = RunContext(references=ReferenceSet(models))
    for attack, params in [("rmia", {"a": 0.3}), ("lira", {})]:
        (built,) = build_attacks([attack], run, params={attack: params})
        with pytest.raises(ConfigError) as err:
            built.prepare(samples, run)
        message = str(err.value)
        assert "trained on every one" not in message
        assert "20 IN" not in message and "10 IN" in message and "10 unknown" in message
        assert "nonmembers" in message
    # the same models without 'nonmembers': the other 10 are OUT and both attacks prepare
    plain = tuple(ReferenceModel(f"r{i}", "s", members) for i in range(2))
    run = RunContext(references=ReferenceSet(plain))
    (rmia,) = build_attacks(["rmia"], run, params={"rmia": {"a": 0.3}})
    assert rmia.prepare(samples, run).attack.membership is not None
