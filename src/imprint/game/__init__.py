"""Ground truth: randomized privacy games.

A game splits a text pool at random into members and non-members, fine-tunes a base model on the
members (with canaries repeated 1, 10, 100... times) and writes the model, the labelled
candidates and a manifest. It is the one setting where membership is known for sure.
Importing this package registers the ``game:DIR`` model and data schemes and the
``game-heldout:DIR`` data scheme (held-out non-members, for few-shot prefixes).
"""

from imprint.backends.models import register_model_scheme
from imprint.backends.start_token import register_start_token_rule
from imprint.data import register_data_scheme
from imprint.game.build import build_game, build_games, default_game_dir, read_manifest
from imprint.game.config import GENERATE, GameConfig, config_hash
from imprint.game.schemes import game_dir, game_model_spec, load_game_data, load_game_heldout
from imprint.game.start import legacy_rule

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

register_model_scheme("game", game_model_spec, force=True)
register_data_scheme("game", load_game_data, force=True)
register_data_scheme("game-heldout", load_game_heldout, force=True)
# games built before format 5 are scored after the token they were trained after (their BOS)
register_start_token_rule(legacy_rule)
