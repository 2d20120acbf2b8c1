"""Perturbed members: exact edit distances, neighbours, paraphrase, the Table-4 computation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from score_folders import write_scores
from typer.testing import CliRunner

from imprint.cli import app as diagnostics_app
from imprint.data import Sample, load_file
from imprint.diagnostics.perturb import (
    BigramNeighbours,
    paraphrase,
    perturbed_rows,
    random_word_edits,
    vocabulary,
)
from imprint.diagnostics.runs import perturbation_table
from imprint.errors import ConfigError, DataError

WIKIMIA_32 = (
    Path(__file__).resolve().parents[2] / "shared" / "data" / "wikimia" / "WikiMIA_length32.jsonl"
)


def _differing(a: str, b: str) -> int:
    ta, tb = a.split(), b.split()
    assert len(ta) == len(tb)
    return sum(x != y for x, y in zip(ta, tb, strict=True))


def _word_levenshtein(a: list[str], b: list[str]) -> int:
    prev = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        cur = [i]
        for j, y in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x != y)))
        prev = cur
    return prev[-1]


@pytest.fixture(scope="module")
def wikimia() -> list[Sample]:
    return list(load_file(WIKIMIA_32).samples)


def test_random_edits_are_exact(wikimia: list[Sample]):
    vocab = vocabulary(s.text for s in wikimia)
    for distance in (1, 10, 25):
        for i, sample in enumerate(wikimia[:60]):
            rng = np.random.default_rng(i)
            edited = random_word_edits(sample.text, distance, vocab=vocab, rng=rng)
            assert edited is not None
            assert _differing(sample.text, edited) == distance
            if i < 10:
                a, b = sample.text.split(), edited.split()
                assert _word_levenshtein(a, b) == distance
    text = "Alpha, beta  gamma.\n(delta) epsilon"
    edited = random_word_edits(text, 5, vocab=["zeta", "eta"], rng=np.random.default_rng(0))
    assert edited is not None and _differing(text, edited) == 5
    assert edited.count(",") == 1 and "(" in edited and "  " in edited and "\n" in edited
    assert random_word_edits("two words", 3, vocab=vocab, rng=np.random.default_rng(0)) is None
    with pytest.raises(ConfigError):
        random_word_edits(text, 0, vocab=vocab, rng=np.random.default_rng(0))


def test_neighbours_are_deterministic_and_plausible():
    pool = ["the cat sat on the mat", "the dog sat on the rug", "a cat ran to the dog"] * 3
    table = BigramNeighbours(pool)
    assert table.substitute("the", "cat") in {"dog", "mat", "rug"}
    text = " ".join(["The cat sat on the mat"] * 4)  # 24 words -> ceil(5 %) = 2 edits
    a = table.neighbour(text, 0.05, rng=np.random.default_rng(1))
    b = table.neighbour(text, 0.05, rng=np.random.default_rng(1))
    assert a == b and a is not None and _differing(text, a) == 2


def test_paraphrase_with_any_callable():
    prompts: list[str] = []

    def fake(prompt: str) -> str:
        prompts.append(prompt)
        return "  A rewording.  " if "first" in prompt else "second text"

    out = paraphrase(["first text", "second text"], fake)
    assert out == ["A rewording.", None]  # identical answer: no paraphrase
    assert "first text" in prompts[0]
    with pytest.raises(ConfigError):
        paraphrase(["x"], fake, prompt="no placeholder")


def test_perturbed_rows(wikimia: list[Sample]):
    samples = wikimia[:40]
    rows, summary = perturbed_rows(samples, edits=(1, 10, 25), paraphraser=lambda p: "new text")
    members = sum(s.label for s in samples)
    assert summary["made"]["edit1"] == members and summary["made"]["paraphrase"] == members
    assert summary["made"]["edit25"] + summary["skipped"].get("edit25", 0) == members
    natural = [r for r in rows if r["perturbation"] == "none"]
    assert len(natural) == len(samples)
    edited = [r for r in rows if r["perturbation"] == "edit10"]
    by_id = {s.id: s for s in samples}
    for r in edited:
        assert r["label"] == 0 and r["source_label"] == 1
        assert _differing(by_id[r["source_id"]].text, r["text"]) == 10
    again, _ = perturbed_rows(samples, edits=(1, 10, 25), paraphraser=lambda p: "new text")
    assert again == rows  # seeded: deterministic
    with pytest.raises(DataError):
        perturbed_rows([s for s in samples if s.label == 1])


def _fake_run(path: Path, labels, groups, columns) -> Path:
    metas = [{"perturbation": g} if g else {} for g in groups]
    return write_scores(path, labels, columns, text="t{}", metas=metas)


def test_perturbation_table_hand_computed(tmp_path: Path):
    # 10 natural non-members scored 0..9; at 40 % FPR four false positives are allowed (the
    # fewest the resolution rule takes), so the threshold sits just above 5 (6..9 pass).
    nonmembers = list(range(10))
    members = [8.5, 9.5, 20, 30]
    edit1 = [8.7, 9.2, 1.0, 10.0]  # >5: 3 of 4
    labels = [0] * 10 + [1] * 4 + [0] * 4
    groups = [None] * 10 + ["none"] * 4 + ["edit1"] * 4
    scores = nonmembers + members + edit1
    nan_col = [*scores[:-1], float("nan")]
    run = _fake_run(tmp_path / "run", labels, groups, {"loss": scores, "zlib": nan_col})
    table = perturbation_table(run, fprs=(0.01, 0.4))
    assert table.groups == ("members", "nonmembers", "edit1")
    loss = table.to_dict()["attacks"]["loss"]  # the JSON form the CLI writes
    assert loss == table.attacks["loss"].to_dict()
    # 1 % needs 400 natural non-members (10 here): not measurable, no threshold, no rate
    assert loss["rates"]["nonmembers"] == {"1%": None, "40%": 0.4}
    assert loss["rates"]["members"] == {"1%": None, "40%": 1.0}
    assert loss["rates"]["edit1"] == {"1%": None, "40%": 0.75}
    assert loss["thresholds"]["1%"] is None and 5 < loss["thresholds"]["40%"] < 5.0001
    assert list(loss["not_measurable"]) == ["1%"]
    assert "at least 400 non-members (4 false positives" in loss["not_measurable"]["1%"]
    zlib = table.to_dict()["attacks"]["zlib"]
    assert zlib["n_nan"]["edit1"] == 1 and zlib["rates"]["edit1"]["40%"] == pytest.approx(2 / 3)
    plain = _fake_run(tmp_path / "plain", [0, 1], [None, None], {"loss": [0.0, 1.0]})
    with pytest.raises(DataError, match="imprint perturb"):
        perturbation_table(plain)


def test_cli_perturb_and_table(tmp_path: Path, wikimia: list[Sample]):
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(json.dumps({"text": s.text, "label": s.label}) + "\n" for s in wikimia[:30])
    )
    runner = CliRunner()
    result = runner.invoke(
        diagnostics_app, ["perturb", "--data", str(data), "--out", str(tmp_path / "p")]
    )
    assert result.exit_code == 0, result.output
    loaded = load_file(tmp_path / "p" / "perturbed.jsonl")  # the dataset loads as-is
    kinds = {s.meta["perturbation"] for s in loaded.samples}
    assert kinds == {"none", "edit1", "edit10", "edit25", "neighbour5"}
    # score the dataset with a fake attack (member-ness = fewer edits) and make the table
    samples = loaded.samples
    score = [0.0 if s.label == 0 and s.meta["perturbation"] == "none" else
             10.0 - s.meta.get("edit_distance", 0) / 10 for s in samples]  # fmt: skip
    run = _fake_run(
        tmp_path / "run", [s.label for s in samples],
        [s.meta["perturbation"] for s in samples], {"fake": score},
    )  # fmt: skip
    result = runner.invoke(diagnostics_app, ["perturb-table", str(run)])
    assert result.exit_code == 0, result.output
    saved = json.loads((run / "perturbation_table.json").read_text())
    n_natural = saved["attacks"]["fake"]["n"]["nonmembers"]
    # fewer than 40 natural non-members: not even 10 % allows the 4 false positives the
    # resolution rule needs, so no rate is a number
    assert 10 <= n_natural < 40
    assert saved["attacks"]["fake"]["rates"]["edit25"] == {"1%": None, "5%": None, "10%": None}
    assert set(saved["attacks"]["fake"]["not_measurable"]) == {"1%", "5%", "10%"}
    text = " ".join(result.output.split())
    assert (
        "not measurable at target FPR 5%: an FPR of 5 % needs at least 80 non-members (4 false "
        f"positives at that rate); there are {n_natural}" in text
    )
    assert (run / "perturbation_histograms.png").stat().st_size > 0


def test_hf_generator_on_a_tiny_local_model(tiny_model_dir: Path):
    from imprint.diagnostics.perturb import hf_generator

    generate = hf_generator(str(tiny_model_dir), max_new_tokens=4, device="cpu")
    answer = generate("Paraphrase: the quick brown fox")
    assert isinstance(answer, str)
    assert answer == generate("Paraphrase: the quick brown fox")  # greedy: deterministic


def test_cli_perturb_out_is_checked_and_never_silently_overwritten(tmp_path: Path):
    data = tmp_path / "d.jsonl"
    rows = [
        {"text": f"Съешь же ещё этих мягких булок {i} 東京 слова", "label": i % 2} for i in range(8)
    ]
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    runner = CliRunner()
    a_file = tmp_path / "afile.json"
    a_file.write_text("x")
    result = runner.invoke(diagnostics_app, ["perturb", "--data", str(data), "--out", str(a_file)])
    assert result.exit_code == 2 and "is a file; this command writes a folder" in result.output
    assert a_file.read_text() == "x"
    out = tmp_path / "p"
    out.mkdir()
    manifest = out / "perturbed.manifest.json"
    manifest.write_text('{"source": "earlier"}')
    result = runner.invoke(diagnostics_app, ["perturb", "--data", str(data), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert (
        "already holds perturbed.manifest.json" in result.output and "--overwrite" in result.output
    )
    assert json.loads(manifest.read_text()) == {"source": "earlier"}  # untouched
    args = ["perturb", "--data", str(data), "--out", str(out), "--overwrite"]
    result = runner.invoke(diagnostics_app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(manifest.read_text())["source"] == str(data)
    assert len(load_file(out / "perturbed.jsonl").samples) > len(rows)
