"""``imprint duci`` end to end on a tiny known-fraction game (tiny random Llama models saved to
folders with a training manifest), and its one-line errors for bad input (exit code 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from imprint.cli import app
from imprint.cli.duci import COVERAGE
from imprint.documents.duci import DEVIATIONS

runner = CliRunner()


@pytest.fixture(scope="module")
def duci_game(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """4 reference models on paired halves of 20 documents and a target trained on all of
    them (each model topped up to 20 texts with fillers), saved with a training manifest."""
    import torch

    from imprint.game.duci_game import _train, random_documents
    from imprint.game.reference import reference_halves
    from imprint.training_manifest import ReferenceModel, write_training_manifest

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread beats oversubscribed cores
    root = tmp_path_factory.mktemp("duci-game")
    pool = random_documents(20 + 10, 12, seed=3)
    docs, population = pool[:20], pool[20:]
    fillers = random_documents(20, 12, seed=3 + 7919)
    ids = [f"doc-{i}" for i in range(20)]

    def save(name: str, trained: list[int], seed: int) -> Path:
        chosen = [docs[i] for i in trained] + fillers[: 20 - len(trained)]
        model, tokenizer = _train(str(tiny_model_dir), chosen, epochs=12, lr=3e-3, seed=seed)
        folder = root / name
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        return folder

    refs = []
    for j, half in enumerate(reference_halves(ids, 4, 0)):
        members = sorted(half, key=ids.index)
        folder = save(f"ref-{j}", [ids.index(i) for i in members], 1 + j)
        refs.append(ReferenceModel(f"ref-{j}", str(folder), frozenset(members)))
    target = save("target", list(range(20)), 100)
    write_training_manifest(root / "manifest.json", refs, population=population)
    data = root / "docs.jsonl"
    data.write_text(
        "".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in zip(ids, docs, strict=True))
    )
    torch.set_num_threads(threads)
    return {"root": root, "target": target, "data": data, "population": population}


def _invoke(game: dict, *extra: str) -> object:
    args = [
        "duci",
        "--model",
        str(game["target"]),
        "--references",
        str(game["root"] / "manifest.json"),
    ]
    return runner.invoke(app, [*args, "--data", str(game["data"]), *extra])


def test_duci_command_states_estimate_interval_and_resampling(
    duci_game, tmp_path, one_torch_thread
):
    out = tmp_path / "duci.json"
    cache = tmp_path / "signals.sqlite"
    res = _invoke(duci_game, "--n-bootstrap", "200", "--cache", str(cache), "--out", str(out))
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "DUCI: an estimated" in text and "of the 20 documents were trained on" in text
    assert "95 % interval [" in text
    assert "two-way percentile bootstrap (200 resamples)" in text
    assert "redraws the documents and the reference models with replacement" in text
    assert "Student-t prediction limit from the 4 reference models' rates" in text
    assert "Coverage measured by simulation at 95 %" in text and COVERAGE in text
    assert "the authors' text code (1/perplexity score, 'robust' threshold" in text
    assert "warning: the interval is unreliable" not in text
    result = json.loads(out.read_text())
    lo, hi = result["interval"]
    assert 0.0 <= lo <= min(max(result["estimate"], 0.0), 1.0) <= hi <= 1.0  # cut to [0, 1]
    assert result["n_documents"] == 20
    assert 0 <= result["fpr"] < result["tpr"] <= 1
    assert result["reliable"] and result["degenerate_share"] <= 0.05 and result["model_spread"] > 0
    assert result["deviations"] == list(DEVIATIONS)  # the differences, in the run's record
    # a target trained on every document: the estimate is high, the interval reaches the truth
    assert result["estimate"] > 0.5 and hi >= 0.95, result
    # a rerun is served by the store and gives the same numbers
    again = tmp_path / "again.json"
    res = _invoke(duci_game, "--n-bootstrap", "200", "--cache", str(cache), "--out", str(again))
    assert res.exit_code == 0, res.output
    assert json.loads(again.read_text()) == result
    # the population from a file instead of the manifest: the same texts, the same estimate
    pop = tmp_path / "pop.txt"
    pop.write_text("\n".join(duci_game["population"]) + "\n")
    res = _invoke(
        duci_game, "--n-bootstrap", "200", "--cache", str(cache), "--population", str(pop),
        "--out", str(tmp_path / "pop.json"),
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "pop.json").read_text())["estimate"] == pytest.approx(
        result["estimate"], abs=1e-12
    )


@pytest.mark.parametrize(
    ("content", "suffix", "extra", "message"),
    [
        ('{"id": "doc-0"}\n', ".jsonl", (), "no non-empty 'text' field"),
        ("\n", ".jsonl", (), "no texts in the file"),
        ("not json\n", ".jsonl", (), "not JSON"),
        ("a text\n", ".csv", (), "unknown extension '.csv'"),
        ('{"id": "x", "text": "a"}\n{"id": "y", "text": "b"}\n', ".jsonl", (), "sample ids"),
        (None, ".jsonl", ("--confidence", "1.5"), "--confidence 1.5"),
        (None, ".jsonl", ("--n-bootstrap", "3"), "--n-bootstrap 3"),
    ],
)
def test_duci_command_bad_input_is_one_line_exit_2(
    duci_game, tmp_path, content, suffix, extra, message
):
    game = dict(duci_game)
    if content is not None:
        game["data"] = tmp_path / f"docs{suffix}"
        game["data"].write_text(content)
    res = _invoke(game, *extra)
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split())
    assert res.output.strip().startswith("error:") and "Traceback" not in res.output


def test_duci_command_refuses_a_missing_manifest_and_overlapping_population(duci_game, tmp_path):
    res = runner.invoke(
        app, ["duci", "--model", str(duci_game["target"]), "--references",
              str(tmp_path / "none.json"), "--data", str(duci_game["data"])],
    )  # fmt: skip
    assert res.exit_code == 2 and "no such file or game folder" in res.output
    rows = [json.loads(line) for line in duci_game["data"].read_text().splitlines()]
    pop = tmp_path / "pop.txt"
    pop.write_text(rows[0]["text"] + "\n" + rows[1]["text"] + "\n")
    res = _invoke(duci_game, "--population", str(pop))
    assert res.exit_code == 2 and "shares texts with --data" in " ".join(res.output.split())


def test_read_texts_refuses_bytes_that_are_not_utf8_and_null_ids(tmp_path):
    """Found in the hostile pass: a Latin-1 --data file raised UnicodeDecodeError (a traceback)
    and a null 'document' or 'id' became the document 'None'; both are one-line refusals."""
    from imprint.cli.duci import read_texts
    from imprint.errors import DataError

    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(b'{"id": "a", "text": "ok"}\n{"id": "b", "text": "caf\xe9"}\n')
    with pytest.raises(DataError, match=r"^--data .*latin.jsonl:2: invalid UTF-8 \(byte 0xe9\)"):
        read_texts(latin, "--data")
    for key in ("document", "id"):
        null = tmp_path / f"null-{key}.jsonl"
        null.write_text(json.dumps({"id": "a", "text": "a text", key: None}) + "\n")
        with pytest.raises(DataError, match=f"'{key}' is null; give a string or a number"):
            read_texts(null, "--data")
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbfa text\n")
    assert read_texts(bom, "--population")[0] == ["a text"]
