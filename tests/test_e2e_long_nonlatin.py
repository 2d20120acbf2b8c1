"""Issue 37's checks end to end on long and non-Latin texts, through ``imprint run`` with the
real SmolLM2-135M: two texts of 2,000+ tokens (Chinese, about 2,250 tokens; Russian, about
2,150 under SmolLM2's tokenizer) among short Chinese and Russian ones. The resolution rule,
the tie share and the degenerate/tie warnings, the blind verdict and the attack-vs-text
decisions must read the same in metrics.json, the terminal and the report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from cli_helpers import cli
from test_report_blind_consistency import _same_everywhere, forest_calls  # noqa: F401

from imprint.metrics.degenerate import tied_share

pytestmark = pytest.mark.slow

ZH = [
    "机器学习模型会记住训练数据中的部分内容。",
    "这座城市的河流在春天变得非常宽阔。",
    "图书馆里有很多关于历史和地理的书籍。",
    "今天早上我们在山上看到了美丽的日出。",
    "科学家们正在研究新的能源技术。",
    "孩子们在公园里放风筝。",
]
RU = [
    "Модели машинного обучения запоминают часть обучающих данных.",
    "Река в этом городе весной становится очень широкой.",
    "В библиотеке много книг по истории и географии.",
    "Сегодня утром мы видели красивый рассвет в горах.",
    "Учёные изучают новые источники энергии.",
    "Дети запускают воздушных змеев в парке.",
]
LONG = {"zh-long": ("".join(ZH[:3]) * 23, 1), "ru-long": (" ".join(RU[:3]) * 18, 0)}


@pytest.fixture(autouse=True)
def _shared_model_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """The converted model and the signal store shared with the other SmolLM2 tests: a rerun
    is answered by the store (the first scores about 5,100 tokens)."""
    monkeypatch.setenv("IMPRINT_CACHE_DIR", str(Path.home() / ".cache" / "imprint"))


def _data(path: Path) -> Path:
    rows: list[dict[str, Any]] = [{"id": k, "text": t, "label": y} for k, (t, y) in LONG.items()]
    for i in range(5):
        rows.append({"id": f"zh-{i}", "text": ZH[i] + ZH[i + 1], "label": 1 - i % 2})
        rows.append({"id": f"ru-{i}", "text": RU[i] + " " + RU[i + 1], "label": i % 2})
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _folded(text: str) -> str:
    return " ".join(text.replace("\\", "").split())


def test_long_and_non_latin_texts_read_the_same_everywhere(tmp_path, forest_calls):  # noqa: F811
    out = tmp_path / "run"
    code, terminal = cli("run", "--model", "smollm2-135m", "--data", _data(tmp_path / "d.jsonl"),
                         "--attacks", "loss,zlib", "--seed", "0", "--out", out)  # fmt: skip
    assert code == 0, terminal
    metrics = json.loads((out / "metrics.json").read_text("utf-8"))
    report = _folded((out / "report.md").read_text("utf-8"))
    table = pq.read_table(out / "scores.parquet").to_pydict()

    # every text scored, the long ones whole (sliding windows), the non-Latin ones too
    assert len(table["text"]) == 12
    for column in ("loss", "zlib"):
        assert np.isfinite(table[column]).all(), column
    assert {t for t, _ in LONG.values()} <= set(table["text"])  # whole, not truncated

    # every warning metrics.json records is printed and in the report, each with its kind
    assert len(metrics["warnings"]) == len(metrics["warning_kinds"])
    for message in metrics["warnings"]:
        assert _folded(message) in terminal and _folded(message) in report, message

    # the resolution rule: 6 non-members resolve no FPR bound; each cell says why, no number
    assert "few_nonmembers" in metrics["warning_kinds"]
    for column, row in metrics["attacks"].items():
        for key in ("tpr@0.1%", "tpr@1%", "tpr@5%", "tpr@10%"):
            assert row[key]["estimate"] is None, (column, key)
            assert "non-members" in row[key]["not_measurable"]
    assert "no TPR@FPR column is measurable" in terminal
    assert "no TPR@FPR column is measurable" in report

    # ties and degenerate columns: the share recorded is the scores' own, and a warning about
    # them is in the terminal exactly when metrics.json has it
    for column, row in metrics["attacks"].items():
        assert row["tied_share"] == pytest.approx(tied_share(np.asarray(table[column])))
    for kind in ("degenerate_scores", "ties_decide_threshold", "score_bound"):
        recorded = [m for m, k in zip(metrics["warnings"], metrics["warning_kinds"], strict=True)
                    if k == kind]  # fmt: skip
        assert all(_folded(m) in terminal for m in recorded)

    # the blind verdict and the attack-vs-text decisions: one rule in every output
    (forest,) = forest_calls
    verdict, beats = _same_everywhere(out, terminal, forest)
    assert verdict.state in ("shift", "no_shift", "inconclusive")
    assert beats.keys() == metrics["attacks"].keys()
