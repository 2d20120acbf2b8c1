"""What a run leaves out and how its TPR intervals' low ends are set are said, not only done.

A real run on the tiny model with ``on_bad="drop"`` and 23 empty texts (dropped by the loader):
metrics.json counts them (``samples``: given, scored, dropped by reason, where the ids are), the
report's Dropped samples table lists the first 20 ids and names the manifest key holding all of
them, and the terminal prints the same line the report opens with. Each measured TPR@FPR cell
of metrics.json states its low-end rule (``low_end``, issue 37's widening at the threshold's
expected FPR), which the report's interval note repeats, and reading metrics.json back keeps
both.
"""

from __future__ import annotations

import html
import io
import json
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from imprint.evaluation import read_metrics
from imprint.evaluation.dropped import SHOWN_IDS
from imprint.formats import schema
from imprint.metrics import bootstrap_metrics
from imprint.metrics.bootstrap import TPR_LOW_END
from imprint.report.render import metrics_counts

N_EMPTY = SHOWN_IDS + 3  # more than the table shows: the rest named by count and key
N_PER_LABEL = 45  # 45 non-members resolve TPR@10 % (the rule asks 40), with an edge read
# no id field: a row's id is its file stem and line, the empty ones after the 90 texts
EMPTY_IDS = [f"d:{2 * N_PER_LABEL + 1 + i}" for i in range(N_EMPTY)]


@pytest.fixture(scope="module")
def run(tiny_model_dir, tmp_path_factory):
    from imprint.run import RunConfig, execute_run

    tmp = tmp_path_factory.mktemp("dropped")
    rows = [{"label": y, "text": f"{'old' if y else 'new'} tale {i} of the sea"}
            for y in (1, 0) for i in range(N_PER_LABEL)]  # fmt: skip
    rows += [{"label": i % 2, "text": "  "} for i in range(N_EMPTY)]
    data = tmp / "d.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = RunConfig(model=str(tiny_model_dir), data=str(data), out=tmp / "run",
                       attacks="loss", n_bootstrap=20, shot_holdout=0, on_bad="drop",
                       blind=False, progress=False, shared_args={"device": "cpu"})  # fmt: skip
    said = io.StringIO()
    result = execute_run(config, console=Console(file=said, width=400, color_system=None))
    return result, said.getvalue()


def test_metrics_json_counts_the_drops_by_reason_and_scored_of_given(run) -> None:
    result, _ = run
    metrics = json.loads((result.out / "metrics.json").read_text())
    assert metrics["samples"] == {
        "given": 2 * N_PER_LABEL + N_EMPTY,
        "scored": 2 * N_PER_LABEL,
        "dropped_total": N_EMPTY,
        "dropped": {"empty text": N_EMPTY},
        "dropped_ids_in_manifest": {"empty text": "data.dropped_ids"},
    }
    jsonschema.validate(metrics, schema("metrics"))
    manifest = json.loads((result.out / "manifest.json").read_text())
    jsonschema.validate(manifest, schema("manifest"))
    assert manifest["data"]["dropped_ids"] == {"empty text": EMPTY_IDS}
    assert read_metrics(result.out / "metrics.json").samples.to_dict() == metrics["samples"]


def test_the_report_lists_the_dropped_ids_and_where_the_rest_are(run) -> None:
    result, _ = run
    page = html.unescape((result.out / "report.html").read_text(encoding="utf-8"))
    shown = ", ".join(EMPTY_IDS[:SHOWN_IDS])
    assert (
        f"{shown} and {N_EMPTY - SHOWN_IDS} more; all in manifest.json at data.dropped_ids" in page
    )
    assert EMPTY_IDS[SHOWN_IDS] not in page  # the 21st is counted, not listed


def test_the_terminal_and_the_report_say_the_same_line(run) -> None:
    result, terminal = run
    line = result.metrics.samples.summary(metrics_counts(result.metrics))
    assert f"{N_EMPTY} dropped ({N_EMPTY} empty text)" in line
    assert line in " ".join(terminal.split())
    assert line in html.unescape((result.out / "report.html").read_text(encoding="utf-8"))


def test_each_measured_tpr_interval_states_its_low_end_in_metrics_json_and_the_report(
    run,
) -> None:
    result, _ = run
    cell = json.loads((result.out / "metrics.json").read_text())["attacks"]["loss"]["tpr@10%"]
    assert cell["estimate"] is not None and cell["low_end"] == TPR_LOW_END
    assert read_metrics(result.out / "metrics.json").attacks["loss"].low_end == {0.1: TPR_LOW_END}
    page = html.unescape((result.out / "report.html").read_text(encoding="utf-8"))
    assert f"TPR@FPR intervals: {TPR_LOW_END}." in page


def test_without_the_widening_no_low_end_is_claimed() -> None:
    labels = [1] * 50 + [0] * 50
    scores = [i / 100 for i in range(100)]
    kept = bootstrap_metrics(labels, scores, n_resamples=20, fpr_bounds=(0.1,))
    plain = bootstrap_metrics(labels, scores, n_resamples=20, fpr_bounds=(0.1,),
                              widen_at_edge=False)  # fmt: skip
    assert kept.to_dict()["tpr@10%"]["low_end"] == TPR_LOW_END
    assert "low_end" not in plain.to_dict()["tpr@10%"]


def test_a_folder_written_before_reads_back_without_claims(tmp_path: Path) -> None:
    stored = Path(__file__).parent / "fixtures" / "metrics_head_sequence.json"
    metrics = read_metrics(stored)
    assert metrics.samples is None
    assert all(not c.low_end for c in metrics.attacks.values())
