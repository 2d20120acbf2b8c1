"""Ground truth: randomized privacy games.

A game splits a text pool at random into members and non-members, fine-tunes a base model on the
members (with canaries repeated 1, 10, 100... times) and writes the model, the labelled
candidates and a manifest. It is the one setting where membership is known for sure.
The ``game:DIR`` model and data schemes, the ``game-heldout:DIR`` data scheme (held-out
non-members, for few-shot prefixes) and the start-token rule of older games are entry points
of imprint's own distribution (groups ``imprint.model_schemes``, ``imprint.data_schemes`` and
``imprint.start_token_rules`` in pyproject.toml) naming :mod:`imprint.game.schemes` and
:mod:`imprint.game.start`: the earlier stages' registries find them without naming this package,
nothing needs to import it for them to resolve, and importing it registers nothing.
"""

from imprint.game.build import build_game, build_games, default_game_dir, read_manifest
from imprint.game.config import GENERATE, GameConfig, config_hash
from imprint.game.schemes import game_dir, game_model_spec, load_game_data, load_game_heldout

__all__ = [
    "GENERATE",
    "GameConfig",
    "build_game",
    "build_games",
    "config_hash",
    "default_game_dir",
    "game_dir",
    "game_model_spec",
    "load_game_data",
    "load_game_heldout",
    "read_manifest",
]
