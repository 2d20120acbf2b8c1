"""Configuration of a randomized privacy game: a frozen, validated dataclass and its hash.

Every field changes what the game *is* (its split, texts or weights), so every field goes into the
game's hash; where the game is written and on which device it trains do not.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from imprint.errors import ConfigError

if TYPE_CHECKING:
    from imprint.data import Sample

__all__ = [
    "DEFAULT_LR",
    "GENERATE",
    "GENERATORS",
    "INCLUSIONS",
    "MAX_CANARIES",
    "METHODS",
    "GameConfig",
    "config_hash",
]

#: ``pool=GENERATE`` samples the pool texts from the base model instead of reading a file.
GENERATE = "generate"
METHODS = ("full", "lora", "top")
GENERATORS = ("sampled", "random", "high-perplexity")
#: How canaries become members: ``split`` (k members and k non-members per repetition count, a
#: fixed-size random split) or ``bernoulli`` (each canary in with probability 1/2 by a seeded
#: draw on its text: Steinke et al. 2023's one-run design, which the one-run audit needs).
INCLUSIONS = ("split", "bernoulli")
#: Learning rate used when ``lr`` is not given, per training method.
DEFAULT_LR = {"full": 5e-5, "top": 1e-4, "lora": 1e-3}
#: Upper bound on distinct canaries (members + non-members): each one is sampled from the model,
#: so this bounds the time spent before training; raise it deliberately if you need more.
MAX_CANARIES = 2000
#: Bump when the meaning of a built game changes (invalidates cached games). 5: texts are trained
#: (and sampled) after the start token scoring uses, recorded in game.json (see game/start.py).
GAME_FORMAT = 5


def _positive_int(value: Any, name: str, *, minimum: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _positive_float(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ConfigError(f"{name} must be a positive finite number, got {value!r}")


@dataclass(frozen=True)
class GameConfig:
    """A privacy game: which base model, which texts, how members are trained in.

    The pool (``pool_size`` texts, from a file or ``"generate"``d by the base model) is split at
    random (``seed``) into members (``pool_size // 2``) and non-members. Members are trained into
    the base model for ``epochs`` epochs with ``method`` (``full`` fine-tune, ``lora`` adapters
    merged before saving, or ``top``: only the top ``top_layers`` transformer blocks and the final
    norm). Canaries: for each ``r`` in ``canary_repetitions``, ``canaries_per_repetition`` unique
    texts are each inserted ``r`` times into the training data, and as many never-trained
    canaries from the same generator become non-members of the group ``canary x{r}``.

    ``lr=None`` picks :data:`DEFAULT_LR` for the method; ``canary_words=None`` uses ``words``.
    ``words=None`` keeps file texts whole (a generated pool needs a word count).
    ``max_canary_share`` bounds the fraction of training sequences (one per repetition) that are
    canaries, so that a few canaries repeated many times do not swamp the natural members.
    ``heldout`` more pool texts are drawn like non-members but kept out of training *and* of
    the candidates (``heldout.jsonl``, data spec ``game-heldout:DIR``): known non-members for
    few-shot prefixes (ReCaLL), so no candidate has to be spent on them.
    ``shift=True`` draws the non-members from a different distribution (other prompts), the
    distribution-shift trap: attacks and the blind baseline then both "succeed". The shifted
    texts come from other prompts (cooking) sampled at ``shift_temperature``: another topic and a
    text the model finds less predictable, as newer documents are for a real model.
    """

    model: str = "smollm2-135m"
    pool: str = GENERATE
    pool_size: int = 200
    words: int | None = 48
    seed: int = 0
    method: str = "full"
    epochs: int = 3
    lr: float | None = None
    batch_size: int = 8
    max_length: int = 128
    weight_decay: float = 0.0
    top_layers: int = 2
    lora_rank: int = 8
    lora_alpha: int = 16
    lora_targets: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    canary_repetitions: tuple[int, ...] = (1, 10)
    canaries_per_repetition: int = 4
    canary_generator: str = "sampled"
    canary_temperature: float = 1.5
    canary_words: int | None = None
    max_canary_share: float = 0.5
    pool_temperature: float = 1.0
    heldout: int = 10
    shift: bool = False
    shift_temperature: float = 1.3
    canary_inclusion: str = "split"
    # DP-SGD (imprint.game.dp): None trains without DP; else the target epsilon at dp_delta,
    # per-sample gradients clipped to max_grad_norm (LoRA only)
    dp_epsilon: float | None = None
    dp_delta: float = 1e-5
    max_grad_norm: float = 1.0
    # a document game (> 0): each pool text is a document of this many sequences of ``words``
    # words, membership is per document and every sequence of a member is trained on
    # (imprint.game.documents); 0 is a game of single texts
    doc_sequences: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "canary_repetitions", tuple(self.canary_repetitions))
        object.__setattr__(self, "lora_targets", tuple(self.lora_targets))
        if self.lr is None and self.method in DEFAULT_LR:
            object.__setattr__(self, "lr", DEFAULT_LR[self.method])
        if self.canary_words is None:
            object.__setattr__(self, "canary_words", self.words or 32)
        self._validate()

    # -- validation -------------------------------------------------------------------------------
    def _validate(self) -> None:
        if not isinstance(self.model, str) or not self.model.strip():
            raise ConfigError("model must be a model spec (alias, folder, gguf:PATH, hub id)")
        if not isinstance(self.pool, str) or not self.pool.strip():
            raise ConfigError(f"pool must be a file path or {GENERATE!r}, got {self.pool!r}")
        _positive_int(self.pool_size, "pool_size", minimum=4)
        if self.words is not None:
            _positive_int(self.words, "words")
        elif self.pool == GENERATE:
            raise ConfigError("a generated pool needs words (words per text), not None")
        _positive_int(self.seed, "seed", minimum=0)
        if self.method not in METHODS:
            raise ConfigError(f"unknown training method {self.method!r}; use one of {METHODS}")
        _positive_int(self.epochs, "epochs")
        _positive_float(self.lr, "lr")
        _positive_int(self.batch_size, "batch_size")
        _positive_int(self.max_length, "max_length", minimum=8)
        if not isinstance(self.weight_decay, int | float) or self.weight_decay < 0:
            raise ConfigError(f"weight_decay must be >= 0, got {self.weight_decay!r}")
        _positive_int(self.top_layers, "top_layers")
        _positive_int(self.lora_rank, "lora_rank")
        _positive_int(self.lora_alpha, "lora_alpha")
        if not self.lora_targets or not all(isinstance(t, str) and t for t in self.lora_targets):
            raise ConfigError(f"lora_targets must name modules, got {self.lora_targets!r}")
        if self.shift and self.pool != GENERATE:
            raise ConfigError(
                "shift=True draws non-members from a different generated distribution; it needs "
                f"pool={GENERATE!r} (a file pool has no second distribution to draw from)"
            )
        _positive_float(self.pool_temperature, "pool_temperature")
        _positive_int(self.heldout, "heldout", minimum=0)
        _positive_float(self.shift_temperature, "shift_temperature")
        self._validate_canaries()
        self._validate_dp()
        if self.doc_sequences:
            check_document_game(self)

    def _validate_dp(self) -> None:
        if self.dp_epsilon is None:
            if (self.dp_delta, self.max_grad_norm) != (1e-5, 1.0):
                raise ConfigError("dp_delta and max_grad_norm apply to DP training: set dp_epsilon")
            return
        _positive_float(self.dp_epsilon, "dp_epsilon")
        _positive_float(self.max_grad_norm, "max_grad_norm")
        if not isinstance(self.dp_delta, int | float) or not 0 < self.dp_delta < 1:
            raise ConfigError(f"dp_delta must be in (0, 1), got {self.dp_delta!r}")
        if self.method != "lora":
            raise ConfigError(
                f"DP training supports method 'lora' only, not {self.method!r} (Opacus has no "
                "per-sample gradients for these models' RMSNorm layers and tied embeddings); "
                "pass --method lora"
            )
        if any(r != 1 for r in self.canary_repetitions):
            raise ConfigError(
                f"a DP game's canaries are seen once (repetitions {self.canary_repetitions}): "
                "DP protects one training sequence, a canary repeated r times only by group "
                "privacy. Pass --repetitions 1"
            )

    def _validate_canaries(self) -> None:
        reps = self.canary_repetitions
        for r in reps:
            _positive_int(r, "every canary repetition count")
        if len(set(reps)) != len(reps):
            raise ConfigError(f"canary_repetitions has duplicates: {reps}; list each count once")
        if self.canary_generator not in GENERATORS:
            raise ConfigError(
                f"unknown canary generator {self.canary_generator!r}; use one of {GENERATORS}"
            )
        _positive_float(self.canary_temperature, "canary_temperature")
        _positive_int(self.canary_words, "canary_words")
        if self.canary_inclusion not in INCLUSIONS:
            raise ConfigError(
                f"unknown canary inclusion {self.canary_inclusion!r}; use one of {INCLUSIONS}"
            )
        if not reps:
            return
        _positive_int(self.canaries_per_repetition, "canaries_per_repetition")
        if self.canary_inclusion == "bernoulli" and len(reps) != 1:
            raise ConfigError(
                f"one-run canaries (canary_inclusion='bernoulli') have one repetition count, "
                f"got {reps}; pass e.g. --repetitions 1"
            )
        n_canaries = self.n_canaries_made
        if n_canaries > MAX_CANARIES:
            raise ConfigError(
                f"{n_canaries} canaries asked for (members and non-members: 2 x "
                f"{self.canaries_per_repetition} per repetition count x {len(reps)} counts); at "
                f"most {MAX_CANARIES} are generated. Lower canaries_per_repetition or the number "
                "of repetition counts."
            )
        if not 0 < self.max_canary_share < 1:
            raise ConfigError(f"max_canary_share must be in (0, 1), got {self.max_canary_share}")
        # one-run canaries: the expected number of members (half of them)
        per_count = self.n_canaries_made // 2 // len(reps)
        canary_seqs = per_count * sum(reps)
        share = canary_seqs / (canary_seqs + self.n_members)
        if share > self.max_canary_share:
            raise ConfigError(
                f"canaries would be {share:.0%} of the training sequences ({canary_seqs} canary "
                f"sequences = {per_count} x sum{reps} vs {self.n_members} "
                f"natural members), above max_canary_share={self.max_canary_share}; the game "
                "would mostly train on canaries. Fix: lower the repetition counts or "
                "canaries_per_repetition, raise pool_size, or raise max_canary_share."
            )

    # -- derived ----------------------------------------------------------------------------------
    @property
    def n_members(self) -> int:
        """Natural members: half the pool (rounded down)."""
        return self.pool_size // 2

    @property
    def n_canaries(self) -> int:
        """Canary members (= canary non-members) of a ``split`` game."""
        return self.canaries_per_repetition * len(self.canary_repetitions)

    @property
    def n_canaries_made(self) -> int:
        """Canaries generated: ``2 * n_canaries`` when split, ``canaries_per_repetition`` (the
        one-run ``m``, about half of them members) when ``bernoulli``."""
        if self.canary_inclusion == "bernoulli":
            return self.canaries_per_repetition * len(self.canary_repetitions)
        return 2 * self.n_canaries

    def with_epochs(self, epochs: int) -> GameConfig:
        return replace(self, epochs=epochs)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["canary_repetitions"] = list(self.canary_repetitions)
        out["lora_targets"] = list(self.lora_targets)
        if not self.doc_sequences:  # games of single texts keep the hash they always had
            del out["doc_sequences"]
        # so do games without DP or one-run canaries
        if self.canary_inclusion == "split":
            del out["canary_inclusion"]
        if self.dp_epsilon is None:
            for key in ("dp_epsilon", "dp_delta", "max_grad_norm"):
                del out[key]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GameConfig:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known)


def check_document_game(config: GameConfig) -> None:
    """Refuse what a document game cannot do, saying what to change."""
    k = config.doc_sequences
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"doc_sequences must be an integer >= 1 (0: no documents), got {k!r}")
    if config.words is None:
        raise ConfigError("a document game needs words (words per sequence), not None")
    if config.canary_repetitions:
        raise ConfigError(
            "a document game has no canaries (membership is per document); pass --repetitions ''"
        )
    if config.shift:
        raise ConfigError("a document game has no shifted non-members; drop --shift")


def config_hash(config: GameConfig, *, model_fingerprint: str, pool_fingerprint: str) -> str:
    """Content key of a game: config, base weights, pool contents and the game format."""
    payload = {
        "config": config.to_dict(),
        "model_fingerprint": model_fingerprint,
        "pool_fingerprint": pool_fingerprint,
        "format": GAME_FORMAT,
    }
    blob = json.dumps(payload, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


@dataclass
class BuildPlan:
    """What a game build needs before any model is loaded (made by ``build._plan``)."""

    config: GameConfig
    model_fingerprint: str
    pool: list[Sample] | None  # None: generated
    pool_info: dict[str, Any]
    key: str
