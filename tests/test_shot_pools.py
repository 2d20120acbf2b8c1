"""Shot pools and shot sources: one-class and unlabelled pools, refused mislabelled pool rows,
and perturbed members never used as non-member shots."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from imprint.attacks.base import RunContext
from imprint.attacks.con_recall import ConRecall
from imprint.attacks.recall import PREFIX, Recall
from imprint.data import Sample, load_file
from imprint.data.pools import load_shot_pool
from imprint.diagnostics.perturb import perturbed_rows
from imprint.errors import ConfigError, DataError
from imprint.run import RunConfig, execute_run

# non-Latin and mixed scripts on purpose: nothing here may depend on ASCII words
NONMEMBER_TEXTS = [f"Нечленский текст {i}: 東京の天気は晴れ、 river {i} flows." for i in range(12)]
MEMBER_TEXTS = [f"Член {i} совета: 会議は{i}回目 the council met again today." for i in range(20)]


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def _shots(prefix: str) -> list[str]:
    return prefix.split("\n\n")[:-1]


@pytest.mark.parametrize("kind", ["labelled", "unlabelled", "txt"])
def test_run_accepts_a_nonmember_pool_with_no_members(tiny_model_dir, tmp_path, kind):
    # short texts: the tiny model has a 128-token context and these are byte-level tokens
    data = _write_jsonl(
        tmp_path / "eval.jsonl",
        [{"text": f"Член {i} met", "label": 1} for i in range(6)]
        + [{"text": f"river {i} 晴れ", "label": 0} for i in range(6)],
    )
    texts = [f"雨 {i}" for i in range(4)]
    if kind == "txt":
        pool = tmp_path / "pool.txt"
        pool.write_text("\n".join(texts) + "\n", "utf-8")
    else:
        label = {"label": 0} if kind == "labelled" else {}
        pool = _write_jsonl(tmp_path / "pool.jsonl", [{"text": t, **label} for t in texts])
    result = execute_run(
        RunConfig(
            model=str(tiny_model_dir),
            data=str(data),
            out=tmp_path / "run",
            attacks=("recall",),
            params={"recall": {"n_shots": 2}},
            pools={"nonmembers": str(pool)},
            n_bootstrap=20,
            progress=False,
            blind=False,
        )
    )
    # shots came from the pool: no evaluation sample was spent on them
    assert result.manifest["data"]["evaluated"] == 12
    assert result.manifest["data"]["dropped"] == {}
    assert result.scores["recall"].shape == (12,)


@pytest.mark.parametrize("kind", ["txt", "jsonl", "csv"])
def test_unlabelled_pool_takes_the_class_of_its_name(tmp_path, kind):
    texts = NONMEMBER_TEXTS[:4]
    if kind == "txt":
        spec = tmp_path / "pool.txt"
        spec.write_text("\n".join(texts) + "\n\n", "utf-8")  # blank lines are skipped
    elif kind == "jsonl":
        spec = _write_jsonl(tmp_path / "pool.jsonl", [{"text": t, "source": "x"} for t in texts])
    else:
        spec = tmp_path / "pool.csv"
        spec.write_text("text\n" + "".join(f'"{t}"\n' for t in texts), "utf-8")
    pool = load_shot_pool("nonmembers", str(spec))
    assert [s.text for s in pool] == texts and {s.label for s in pool} == {0}
    members = load_shot_pool("members", str(spec))
    assert {s.label for s in members} == {1}
    evaluation = [Sample(f"m{i}", t, 1) for i, t in enumerate(MEMBER_TEXTS[:3])]
    evaluation += [Sample(f"n{i}", t, 0) for i, t in enumerate(NONMEMBER_TEXTS[8:11])]
    prep = Recall(n_shots=4).prepare(evaluation, RunContext(pools={"nonmembers": pool}))
    assert sorted(_shots(prep.prefixes[PREFIX])) == sorted(texts)
    assert prep.removed_ids == frozenset()


def test_labelled_member_in_the_nonmember_pool_is_refused_with_its_id(tmp_path):
    rows = [{"id": f"p{i}", "text": t, "label": 0} for i, t in enumerate(NONMEMBER_TEXTS[:5])]
    rows.append({"id": "intruder", "text": MEMBER_TEXTS[0], "label": 1})
    path = _write_jsonl(tmp_path / "pool.jsonl", rows)
    with pytest.raises(DataError, match=r"'nonmembers' pool .* labelled member.*:6"):
        load_shot_pool("nonmembers", str(path))
    # a pool handed over in code is checked too, before any shot is drawn
    pool = tuple(Sample(r["id"], r["text"], r["label"]) for r in rows)
    evaluation = [Sample("m", MEMBER_TEXTS[1], 1), Sample("n", NONMEMBER_TEXTS[6], 0)]
    for seed in range(5):
        with pytest.raises(DataError, match="intruder"):
            Recall(n_shots=5).prepare(evaluation, RunContext(seed=seed, pools={"nonmembers": pool}))


def test_nonmember_in_the_member_pool_is_refused():
    pool = (Sample("k0", MEMBER_TEXTS[5], 1), Sample("wrong", NONMEMBER_TEXTS[5], 0))
    evaluation = [Sample(f"n{i}", t, 0) for i, t in enumerate(NONMEMBER_TEXTS[:4])]
    evaluation.append(Sample("m", MEMBER_TEXTS[0], 1))
    with pytest.raises(DataError, match=r"'members' pool .* labelled non-member: ids wrong"):
        ConRecall(n_shots=1).prepare(evaluation, RunContext(pools={"members": pool}))


def test_unknown_pool_name_is_refused():
    with pytest.raises(ConfigError, match="Did you mean 'nonmembers'"):
        load_shot_pool("nonmember", "pool.txt")


def _perturbed_dataset(tmp_path: Path) -> list[Sample]:
    """What ``imprint perturb --model`` evaluates: natural rows plus edited members (label 0)."""
    samples = [Sample(f"m{i}", t, 1) for i, t in enumerate(MEMBER_TEXTS)]
    samples += [Sample(f"n{i}", t, 0) for i, t in enumerate(NONMEMBER_TEXTS)]
    rows, summary = perturbed_rows(samples, edits=(1, 3, 5), seed=0)
    assert sum(summary["made"].values()) > 3 * len(NONMEMBER_TEXTS)  # shots would hit them
    return list(load_file(_write_jsonl(tmp_path / "perturbed.jsonl", rows)).samples)


def test_perturbed_members_never_become_nonmember_shots(tmp_path):
    samples = _perturbed_dataset(tmp_path)
    natural = {s.text for s in samples if s.label == 0 and s.meta["perturbation"] == "none"}
    for seed in range(5):
        prep = Recall(n_shots=10).prepare(samples, RunContext(seed=seed))
        shots = _shots(prep.prefixes[PREFIX])
        assert len(shots) == 10 and set(shots) <= natural, seed
        by_id = {s.id: s for s in samples}
        assert all(by_id[i].text in shots for i in prep.removed_ids)


def test_rows_sharing_a_source_with_a_shot_leave_the_evaluation():
    natural = [Sample(f"n{i}", t, 0) for i, t in enumerate(NONMEMBER_TEXTS[:6])]
    derived = [
        Sample(
            f"{s.id}::paraphrase",
            s.text[::-1],
            0,
            {"perturbation": "paraphrase", "source_id": s.id},
        )
        for s in natural
    ]
    members = [Sample(f"m{i}", t, 1) for i, t in enumerate(MEMBER_TEXTS[:3])]
    prep = Recall(n_shots=3).prepare(natural + derived + members, RunContext(seed=1))
    shot_ids = {s.id for s in natural if s.text in _shots(prep.prefixes[PREFIX])}
    assert len(shot_ids) == 3
    assert prep.removed_ids == shot_ids | {f"{i}::paraphrase" for i in shot_ids}


@pytest.mark.parametrize("field", ["is_member", "Membership", "gold_label"])
def test_pool_field_named_like_a_label_but_not_the_label_field_is_refused(tmp_path, field):
    # before: no label/labels/member field -> the pool counted as unlabelled, and these
    # member rows silently became non-member shots
    rows = [{"text": t, field: 1} for t in MEMBER_TEXTS[:4]]
    path = _write_jsonl(tmp_path / "pool.jsonl", rows)
    with pytest.raises(DataError, match=rf"\['{field}'\] that look like membership.*--label-field"):
        load_shot_pool("nonmembers", str(path))
    csv_path = tmp_path / "pool.csv"
    csv_path.write_text(f"text,{field}\n" + "".join(f'"{t}",1\n' for t in MEMBER_TEXTS[:3]))
    with pytest.raises(DataError, match=field):
        load_shot_pool("nonmembers", str(csv_path))


def test_pool_reads_the_label_and_text_fields_it_is_given(tmp_path):
    rows = [{"id": f"p{i}", "body": t, "is_member": 0} for i, t in enumerate(NONMEMBER_TEXTS[:5])]
    path = _write_jsonl(tmp_path / "pool.jsonl", rows)
    pool = load_shot_pool("nonmembers", str(path), text_field="body", label_field="is_member")
    assert [s.text for s in pool] == NONMEMBER_TEXTS[:5] and {s.label for s in pool} == {0}
    rows[3]["is_member"] = 1
    _write_jsonl(path, rows)
    with pytest.raises(
        DataError, match=r"labelled member or made from a member: ids pool:4 \(id p3\)"
    ):
        load_shot_pool("nonmembers", str(path), text_field="body", label_field="is_member")


def test_pool_labelled_on_some_rows_only_names_the_rows_lacking_it(tmp_path):
    rows = [{"id": f"П{i}", "text": t} for i, t in enumerate(NONMEMBER_TEXTS[:6])]
    rows[2]["label"] = 0
    rows[4]["label"] = 1
    path = _write_jsonl(tmp_path / "pool.jsonl", rows)
    # before: "no label field" (fields were taken from the first row only)
    with pytest.raises(DataError, match=r"labels only 2 of 6 rows with 'label'") as err:
        load_shot_pool("nonmembers", str(path))
    assert "lines 1 (id П0), 2 (id П1), 4 (id П3), 6 (id П5)" in str(err.value)
    assert "no label field" not in str(err.value)


def _is_member_run(tmp_path: Path, model: Path, pool_label: int) -> RunConfig:
    data = _write_jsonl(
        tmp_path / "eval.jsonl",
        [{"text": f"Член {i} met", "is_member": 1} for i in range(6)]
        + [{"text": f"river {i} 晴れ", "is_member": 0} for i in range(6)],
    )
    pool = _write_jsonl(
        tmp_path / "pool.jsonl",
        [{"id": f"q{i}", "text": f"雨 {i}", "is_member": pool_label} for i in range(4)],
    )
    return RunConfig(
        model=str(model),
        data=str(data),
        out=tmp_path / "run",
        attacks=("recall",),
        params={"recall": {"n_shots": 2}},
        pools={"nonmembers": str(pool)},
        label_field="is_member",
        n_bootstrap=20,
        progress=False,
    )


def test_run_applies_its_label_field_to_the_pools(tiny_model_dir, tmp_path):
    with pytest.raises(
        DataError, match=r"labelled member or made from a member: ids pool:1 \(id q0\)"
    ):
        execute_run(_is_member_run(tmp_path, tiny_model_dir, pool_label=1))
    result = execute_run(_is_member_run(tmp_path, tiny_model_dir, pool_label=0))
    assert result.scores["recall"].shape == (12,)
