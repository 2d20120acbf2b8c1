"""The Ray executor: planned work on Ray actors (2 local workers), results stored on the driver.

A worker lost mid-shard (the test hook exits after N requests; ``ray.kill`` on a busy actor)
costs only what it had not delivered: the run completes, its scores equal a local run's, and
every request is executed (and stored) exactly once.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import wikimia_subset
from ray_runs import local_pass, pass_on_executor, tiny_factory

from imprint.cli.flags import config_from_flags
from imprint.errors import ConfigError, MissingDependencyError
from imprint.executors import ExecutorConfig, make_executor
from imprint.requests import RequestRunner, RequestStore
from imprint.requests.client import ModelRequests, local_transformers
from imprint.run import RunConfig, execute_run
from imprint.signals.cache import SignalCache
from imprint.signals.needs import Need
from imprint.signals.plan import run_plan

ray = pytest.importorskip("ray", reason="Ray is the [ray] extra (in [dev]): pip install ray")

ATTACKS = ("loss", "zlib", "min_k", "min_k_pp")
# non-Latin, long and odd texts besides WikiMIA's; 128-token context: long ones are windowed
TEXTS = [
    "Hurricane Ana was the second tropical cyclone to threaten Hawaii in 2014.",
    "東京都は日本の首都であり、人口は約千四百万人である。" * 3,
    "Москва — столица России, город федерального значения.",
    "x",
    "🙂 " * 40,
    " ".join(f"word{i}" for i in range(300)),
] + [f"Numbers like {i}, {i * 10} and {i * 100} appear in many documents." for i in range(30)]


def _config(tiny_model_dir: Path, tmp_path: Path, name: str, **executor: object) -> RunConfig:
    return config_from_flags(
        model=str(tiny_model_dir),
        data=str(wikimia_subset(tmp_path, 12)),
        out=tmp_path / name,
        attacks=ATTACKS,
        device="cpu",
        token_budget=96,  # many small batches, so shards hold several
        cache=tmp_path / f"{name}.sqlite",
        progress=False,
        n_bootstrap=20,
        blind=False,
        executor=ExecutorConfig(**executor),  # type: ignore[arg-type]
    )


def test_run_with_an_actor_lost_mid_shard_equals_local(local_ray, tiny_model_dir, tmp_path):
    local = execute_run(_config(tiny_model_dir, tmp_path, "local"))
    remote = execute_run(
        _config(tiny_model_dir, tmp_path, "ray", kind="ray", workers=2, exit_after=5)
    )
    assert local.scores.keys() == remote.scores.keys() >= set(ATTACKS)
    for column, values in local.scores.items():
        np.testing.assert_allclose(remote.scores[column], values, rtol=0, atol=1e-5)
    passes = remote.manifest["requests"]["target"]["logprobs"]
    stats = remote.manifest["executor"]
    assert stats["kind"] == "ray" and stats["lost_workers"] == 1 and stats["retried_shards"] >= 1
    assert stats["started_workers"] == 3  # two, then one replacement
    assert stats["executed"]["target-0"] == 5  # the lost worker's deliveries were kept
    # every request executed exactly once, and stored once
    assert sum(stats["executed"].values()) == passes["executed"] == passes["requests"]
    assert len(SignalCache(tmp_path / "ray.sqlite")) == passes["requests"]
    # the manifest says where each kind ran: on the workers, or in the driver for a local run
    assert set(stats["where"]["target"]["logprobs"]) <= {"target-0", "target-1", "target-2"}
    assert local.manifest["executor"]["where"] == {
        "target": {"logprobs": {"driver": passes["requests"]}}
    }


def test_ray_kill_mid_shard_loses_nothing(local_ray, tiny_model_dir):
    factory, backend = tiny_factory(tiny_model_dir)
    executor = make_executor(ExecutorConfig(kind="ray", workers=2), {"target": factory})
    killed: list[str] = []

    def progress(label: str, total: int):
        def advance(n: int) -> None:
            actors = executor.actors()  # type: ignore[attr-defined]
            if not killed and len(actors) == 2:  # at the first result, kill a busy actor
                worker, actor = sorted(actors.items())[0]
                ray.kill(actor)
                killed.append(worker)

        return advance

    cache = SignalCache(None)
    signals, report = pass_on_executor(executor, backend, TEXTS, cache, progress)
    expected = local_pass(backend, TEXTS)
    for got, want in zip(signals.get(), expected.get(), strict=True):
        np.testing.assert_array_equal(got.token_ids, want.token_ids)
        np.testing.assert_allclose(got.logp, want.logp, atol=1e-5)
        np.testing.assert_allclose(got.mean_logp, want.mean_logp, atol=1e-5)
    stats = executor.stats
    assert killed and stats.lost_workers == 1 and stats.retried_shards >= 1
    assert sum(stats.executed.values()) == report.per_model["target"].executed == len(TEXTS)
    assert len(cache) == len(TEXTS)


def test_request_runner_samples_on_workers_as_locally(local_ray, tiny_model_dir):
    """Typed requests with a remote form (sampled continuations) run on the workers' replicas
    and give the draws of a local run (seeded per prompt)."""
    factory, backend = tiny_factory(tiny_model_dir)
    executor = make_executor(ExecutorConfig(kind="ray", workers=2), {"target": factory})
    prompts = ["The quick brown", "東京都は", "In 2023 the", "🙂", "Membership"] * 3
    try:
        client = ModelRequests(
            {"target": backend},
            RequestRunner(RequestStore(None), executor=executor),
            local_models=local_transformers,
        )
        remote = client.sample("target", prompts, 2, 5, seed=3)
    finally:
        executor.close()
    local = ModelRequests(
        {"target": backend}, RequestRunner(RequestStore(None)), local_models=local_transformers
    ).sample("target", prompts, 2, 5, seed=3)
    assert remote == local
    unique = len(set(prompts))
    assert sum(executor.stats.executed.values()) == unique
    assert all(w.startswith("target-") for w in executor.stats.executed)


def test_worker_with_other_model_files_is_refused(local_ray, tiny_model_dir, tiny_ref_dir):
    other, _ = tiny_factory(tiny_ref_dir)  # a worker whose files differ from the driver's
    _, backend = tiny_factory(tiny_model_dir)
    executor = make_executor(ExecutorConfig(kind="ray", workers=1), {"target": other})
    try:
        with pytest.raises(ConfigError, match=r"target-0 .* fingerprint .* differ"):
            run_plan(TEXTS[:4], [Need()], {"target": backend}, SignalCache(None), executor=executor)
    finally:
        executor.close()


def test_more_workers_than_cores_is_refused(local_ray, tiny_model_dir):
    factory, backend = tiny_factory(tiny_model_dir)
    executor = make_executor(ExecutorConfig(kind="ray", workers=3), {"target": factory})
    with pytest.raises(ConfigError, match="needs 3 CPUs but the Ray cluster has 2"):
        run_plan(TEXTS[:2], [Need()], {"target": backend}, SignalCache(None), executor=executor)
    executor.close()


def test_executor_options_are_checked_before_any_work():
    with pytest.raises(ConfigError, match="add --executor ray"):
        ExecutorConfig(workers=2)
    with pytest.raises(ConfigError, match="unknown"):
        ExecutorConfig(kind="dask")
    with pytest.raises(ConfigError, match="workers must be an integer >= 1"):
        ExecutorConfig(kind="ray", workers=0)


def test_without_ray_the_cli_names_the_install_command(tmp_path, monkeypatch, tiny_model_dir):
    from typer.testing import CliRunner

    from imprint.cli import app

    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(MissingDependencyError, match=r"pip install 'llm-imprint\[ray\]'"):
        ExecutorConfig(kind="ray")
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["run", "--model", str(tiny_model_dir), "--data", "wikimia:32", "--out", str(out),
         "--executor", "ray", "--cache", str(tmp_path / "c.sqlite")],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "pip install 'llm-imprint[ray]'" in " ".join(result.output.split())
    assert not out.exists() and not (tmp_path / "c.sqlite").exists()  # no work was done


def test_overlap_index_built_on_ray_equals_local_bit_for_bit(local_ray, tmp_path):
    import json

    from typer.testing import CliRunner

    from imprint.cli import app
    from imprint.diagnostics.overlap import build_index

    rows = [json.dumps({"text": t}) for t in TEXTS * 3]
    rows[5:5] = ["not json", "{}", json.dumps({"text": ""}), json.dumps([1])]  # skipped, counted
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(rows) + "\n", encoding="utf-8")
    plain = tmp_path / "corpus.txt"
    plain.write_text("\n\n".join(TEXTS) + "\n", encoding="utf-8")
    local = build_index([corpus, plain], [2, 4], tmp_path / "local", measure_fp=False)
    result = CliRunner().invoke(
        app,
        ["overlap", "build", "--corpus", str(corpus), str(plain), "--out", str(tmp_path / "ray"),
         "--n", "2", "--n", "4", "--no-measure", "--executor", "ray", "--workers", "2"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    remote = json.loads((tmp_path / "ray" / "manifest.json").read_text())
    assert remote["built_on"] == {"executor": "ray", "shards_per_file": 2}
    assert remote["corpus"] == local["corpus"]  # documents and skipped lines counted once
    for n in ("2", "4"):
        assert remote["filters"][n]["n_inserted"] == local["filters"][n]["n_inserted"] > 0
        assert remote["filters"][n]["capacity"] == local["filters"][n]["capacity"]
        file = local["filters"][n]["file"]
        assert (tmp_path / "ray" / file).read_bytes() == (tmp_path / "local" / file).read_bytes()


def test_a_grid_on_ray_loads_each_model_once_and_equals_a_local_grid(
    local_ray, tiny_model_dir, tmp_path
):
    """`imprint experiment --executor ray`: one set of workers per model serves all its runs
    (no restart per cell), and every cell's figures equal the local grid's."""
    import yaml

    from imprint.study.grid import run_grid
    from imprint.study.spec import load_spec

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    data_a, data_b = wikimia_subset(tmp_path / "a", 10), wikimia_subset(tmp_path / "b", 8)
    figures = {}
    for kind in ("local", "ray"):
        content = {
            "models": [{"name": "tiny", "model": str(tiny_model_dir)}],
            "benchmarks": [{"name": "A", "data": str(data_a)}, {"name": "B", "data": str(data_b)}],
            "attacks": ["loss", "min_k_pp"],
            "settings": {"n_bootstrap": 20, "device": "cpu", "blind": False, "token_budget": 96},
            "out": str(tmp_path / f"study-{kind}"),
            # a store per grid: with the shared default the Ray grid would find the local one's
            # passes and start no workers
            "cache": str(tmp_path / f"cache-{kind}.sqlite"),
        }
        (tmp_path / f"{kind}.yaml").write_text(yaml.safe_dump(content), encoding="utf-8")
        spec = load_spec(tmp_path / f"{kind}.yaml")
        executor = ExecutorConfig(kind=kind, workers=2) if kind == "ray" else None
        result = run_grid(spec, executor, progress=False)
        assert result.computed == 4 and result.models_loaded == ["tiny"]
        figures[kind] = {
            (c.key, col): m.auc.estimate for c in result.cells for col, m in c.columns.items()
        }
        if kind == "ray":
            blocks = [
                json.loads(m.read_text())["executor"]
                for m in sorted((tmp_path / "study-ray" / "runs").glob("*/manifest.json"))
            ]
            assert len(blocks) == 2 and {b["kind"] for b in blocks} == {"ray"}
            # the second run's workers are the first run's: started once for the model
            assert {b["started_workers"] for b in blocks} == {2}
    assert figures["ray"].keys() == figures["local"].keys() and len(figures["ray"]) >= 4
    for key, auc in figures["local"].items():
        assert figures["ray"][key] == pytest.approx(auc, abs=1e-9)


def test_acmia_tempered_targets_are_scored_on_workers(local_ray, tiny_model_dir, tmp_path):
    """ACMIA's tempered targets (roles target@t=...) are built on the workers from the target's
    recipe, not scored by the driver; scores equal the local run's."""

    def config(name: str, **executor: object) -> RunConfig:
        return config_from_flags(
            model=str(tiny_model_dir), data=str(wikimia_subset(tmp_path, 6)),
            out=tmp_path / name, attacks=("acmia",), device="cpu", cache=tmp_path / f"{name}.db",
            progress=False, n_bootstrap=20, blind=False,
            executor=ExecutorConfig(**executor),  # type: ignore[arg-type]
        )  # fmt: skip

    local = execute_run(config("local"))
    remote = execute_run(config("ray", kind="ray", workers=1))
    where = remote.manifest["executor"]["where"]
    tempered = [role for role in where if role.startswith("target@t=")]
    assert tempered, where
    for role in tempered:
        assert set(where[role]["logprobs"]) and "driver" not in where[role]["logprobs"], where
    for column, values in local.scores.items():
        np.testing.assert_allclose(remote.scores[column], values, rtol=1e-4, atol=1e-6)


def test_after_a_lost_node_the_next_pool_shrinks_to_what_the_cluster_can_place(monkeypatch):
    """--workers 2 is refused up front on a 1-CPU cluster, but once a node is lost mid-run the
    next role's pool starts as many workers as remain placeable instead of ending the run."""
    from imprint.executors.ray import RayExecutor

    executor = RayExecutor(ExecutorConfig(kind="ray", workers=2), {})
    monkeypatch.setattr(ray, "cluster_resources", lambda: {"CPU": 1})
    assert executor._placeable() == 2  # nothing lost: the number asked (checked when Ray starts)
    executor.stats.lost_workers = 1
    assert executor._placeable() == 1
