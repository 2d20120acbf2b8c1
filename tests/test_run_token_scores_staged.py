"""Review item 19: a token-level attack's ``token_scores.parquet`` is written into the staged run
folder with every other file, so the published folder holds it from the moment it appears (it was
written after the folder was published: a reader, or a kill, saw a run without it)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import imprint.report.writer as writer
from imprint.run import RunConfig, execute_run


def test_token_scores_are_in_the_folder_when_it_is_published(
    tiny_model_dir, tiny_ref_dir, tmp_path, monkeypatch
):
    data = tmp_path / "d.jsonl"
    rows = [{"text": f"A short text number {i} about the Town {i * 7}", "label": i % 2}
            for i in range(8)]  # fmt: skip
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    seen: list[set[str]] = []
    publish = writer.publish

    def watching(staged: Path, out: Path, **kwargs: object) -> None:  # the real publish, watched
        seen.append({p.name for p in Path(staged).iterdir()})
        publish(staged, out, **kwargs)

    monkeypatch.setattr(writer, "publish", watching)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        execute_run(RunConfig(model=str(tiny_model_dir), data=str(data), out=tmp_path / "run",
                              refs=(("base", str(tiny_ref_dir)),), attacks=("informia",),
                              n_bootstrap=20, blind=False, progress=False))  # fmt: skip
    assert len(seen) == 1 and "token_scores.parquet" in seen[0], seen
    assert (tmp_path / "run" / "token_scores.parquet").is_file()
