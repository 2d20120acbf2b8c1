"""One-run canaries and DP-SGD in games (tiny random model): the inclusion draw, the recorded
epsilon, the hash of games without DP, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_game import read_rows, tiny_config, write_pool

from imprint.errors import ConfigError
from imprint.game import GameConfig, build_game, build_games, config_hash
from imprint.game.texts import inclusion_draw


@pytest.fixture(scope="module")
def pool_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_pool(tmp_path_factory.mktemp("pool") / "pool.txt")


def test_inclusion_draw_independent_of_order_and_fair():
    texts = [f"canary text number {i}" for i in range(2000)]
    mask = inclusion_draw(texts, seed=3)
    perm = np.random.default_rng(0).permutation(len(texts))
    again = inclusion_draw([texts[i] for i in perm], seed=3)
    assert np.array_equal(again, mask[perm])  # each canary keeps its own draw
    assert np.array_equal(inclusion_draw(texts[:100], seed=3), mask[:100])  # subsets too
    assert 0.46 < mask.mean() < 0.54  # fair coin: 2,000 draws, 3.6 standard deviations
    assert not np.array_equal(inclusion_draw(texts, seed=4), mask)  # the seed matters


def one_run_config(model: Path, pool: Path, **kw) -> GameConfig:
    base = dict(
        method="lora",
        canary_repetitions=(1,),
        canaries_per_repetition=16,
        canary_inclusion="bernoulli",
        epochs=2,
    )
    base.update(kw)
    return tiny_config(model, pool, **base)


def test_dp_game_records_achieved_epsilon(tmp_path, tiny_model_dir, pool_file, one_torch_thread):
    config = one_run_config(tiny_model_dir, pool_file, dp_epsilon=3.0, dp_delta=1e-4)
    folder = build_game(config, out=tmp_path / "g", progress=False)
    manifest = json.loads((folder / "game.json").read_text())
    dp = manifest["dp"]
    assert dp["target_epsilon"] == 3.0 and dp["delta"] == 1e-4
    assert 0 < dp["epsilon"] <= 3.0  # the accountant's epsilon after every step
    assert dp["epsilon"] > 2.5  # calibrated to the target, not far below it
    assert dp["noise_multiplier"] > 0 and dp["steps"] >= 2
    assert manifest["config"]["dp_epsilon"] == 3.0
    assert len(manifest["train_loss"]) == 2
    # one-run canaries: 16 made, each in with probability 1/2 by its own text
    canaries = [r for r in read_rows(folder) if r["meta"]["kind"] == "canary"]
    assert len(canaries) == 16
    drawn = inclusion_draw([r["text"] for r in canaries], seed=config.seed)
    assert [r["label"] == 1 for r in canaries] == drawn.tolist()
    assert (folder / "model" / "model.safetensors").exists()


def test_games_without_dp_keep_their_hash(tiny_model_dir, pool_file):
    plain = tiny_config(tiny_model_dir, pool_file)
    assert "dp_epsilon" not in plain.to_dict() and "canary_inclusion" not in plain.to_dict()
    key = config_hash(plain, model_fingerprint="m", pool_fingerprint="p")
    dp = one_run_config(tiny_model_dir, pool_file, dp_epsilon=1.0)
    assert config_hash(dp, model_fingerprint="m", pool_fingerprint="p") != key


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"method": "full"}, "lora"),
        (
            {
                "canary_repetitions": (1, 3),
                "canary_inclusion": "split",
                "canaries_per_repetition": 2,
            },
            "seen once",
        ),
        ({"dp_delta": 2.0}, "dp_delta"),
        ({"dp_epsilon": -1.0}, "dp_epsilon"),
    ],
)
def test_dp_config_rejects_bad_input(tiny_model_dir, pool_file, kw, match):
    base = {"dp_epsilon": 1.0, **kw}
    with pytest.raises(ConfigError, match=match):
        one_run_config(tiny_model_dir, pool_file, **base)


def test_one_run_and_dp_option_errors(tiny_model_dir, pool_file, tmp_path):
    with pytest.raises(ConfigError, match="one repetition count"):
        one_run_config(tiny_model_dir, pool_file, canary_repetitions=(1, 3))
    with pytest.raises(ConfigError, match="canary inclusion"):
        one_run_config(tiny_model_dir, pool_file, canary_inclusion="coin")
    with pytest.raises(ConfigError, match="set dp_epsilon"):
        GameConfig(max_grad_norm=2.0)
    config = one_run_config(tiny_model_dir, pool_file, dp_epsilon=1.0)
    with pytest.raises(ConfigError, match="one epoch count"):
        build_games(config, (1, 2), out=tmp_path / "gs", progress=False)


def test_dp_training_survives_an_empty_first_poisson_batch(
    tmp_path, tiny_model_dir, pool_file, one_torch_thread, monkeypatch
):
    """Opacus's Poisson sampler may draw nobody; when that happens first, its loader has no
    batch to copy the layout from and yields zero-row tensors. That step adds noise only."""
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    real = UniformWithReplacementSampler.__iter__
    drawn: list[int] = []

    def empty_first(self):
        for k, indices in enumerate(real(self)):
            drawn.append(0 if k == 0 else len(indices))
            yield [] if k == 0 else indices

    from opacus.optimizers import DPOptimizer

    add_noise, noised = DPOptimizer.add_noise, []

    def record_noise(self):
        add_noise(self)  # the update of a step: clipped sum (none here) plus Gaussian noise
        noised.append(any(float(p.grad.abs().sum()) > 0 for p in self.params))

    monkeypatch.setattr(UniformWithReplacementSampler, "__iter__", empty_first)
    monkeypatch.setattr(DPOptimizer, "add_noise", record_noise)
    config = one_run_config(tiny_model_dir, pool_file, dp_epsilon=3.0, dp_delta=1e-4, epochs=1)
    folder = build_game(config, out=tmp_path / "g", progress=False)
    dp = json.loads((folder / "game.json").read_text())["dp"]
    assert drawn[0] == 0 and len(drawn) == dp["steps"] >= 2  # every step ran, the empty one too
    assert 0 < dp["epsilon"] <= 3.0
    assert len(noised) == dp["steps"] and noised[0]  # the empty step still moved by noise
