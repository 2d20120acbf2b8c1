"""EZ-MIA (Ilić et al. 2026): the Error-Zone score, target vs its pretrained base, token by token.

At the *error positions* E = {t : argmax_v p_target(v | x_<t) != x_t} (where the fine-tuned target
predicts wrongly) take the shift d_t = log p_target(x_t) - log p_ref(x_t) against a reference
model (the target's pretrained base). Fine-tuning on x still pushes x_t up there even when it
does not make it the top choice, so members show more upward than downward shift:

    P = sum_{t in E, d_t > 0} d_t,   N = sum_{t in E, d_t < 0} |d_t|,   EZ = P / N.

The column reports P / (P + N) = EZ / (1 + EZ): a strictly increasing function of the paper's
ratio (same ROC, AUC and TPR at every FPR), bounded in [0, 1] and defined when every shift is
upward (N = 0: score 1, where the ratio is infinite; the authors' code returns 0 there).
Higher = member. Texts with fewer than ``min_error_tokens`` error positions (the authors' code
uses 2), or with no shift at all (P = N = 0), have no defined score: NaN, with a warning; the
report leaves them out and counts them.

``ignore_bos`` (default True, as the authors' ``compute_ez_scores`` calls
``error_zone_pos_neg_sum_ratio(..., ignore_bos=True)``) leaves the first scored position out of
E: the authors mask the first prediction of each sequence. Here that is the prediction of the
text's first token after the start token; with ``--start-token none`` the first token is
context only and the second token's prediction is dropped, exactly the authors' positions for a
tokenizer that adds no BOS (GPT-2).

The comparison is token by token, so the reference must share the target's tokenizer (a base
model and its fine-tune do); a reference that tokenizes a text differently is an error.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from imprint.attacks.base import register
from imprint.attacks.per_reference import PerReferenceAttack
from imprint.backends.base import TokenStats
from imprint.errors import ConfigError
from imprint.signals.needs import Need, SignalSet


def aligned_pairs(
    signals: SignalSet, ref: str, *, attack: str
) -> list[tuple[TokenStats, TokenStats]]:
    """(target, reference) statistics per sample, checked to score the same tokens.

    Raises :class:`ConfigError` naming the sample when the two models tokenize it differently.
    """
    pairs = list(zip(signals.get(), signals.get(Need(model=ref)), strict=True))
    for i, (t, r) in enumerate(pairs):
        if len(t) != len(r) or not np.array_equal(t.token_ids, r.token_ids):
            raise ConfigError(
                f"attack {attack!r} compares the target and reference {ref!r} token by token, "
                f"but they tokenize sample {i} differently ({len(t)} vs {len(r)} scored tokens, "
                f"text starts {signals.texts[i][:40]!r}); use a reference with the target's "
                "tokenizer and start token (e.g. the base model it was fine-tuned from)"
            )
    return pairs


def warn_undefined(attack: str, column: str, n_nan: int, n: int, why: str) -> None:
    """Say how many samples got no score (NaN) and why; the report then leaves them out."""
    if n_nan:
        warnings.warn(
            f"{attack}: {n_nan} of {n} samples have no defined {column} score ({why}); "
            "they are NaN and left out of the metrics",
            RuntimeWarning,
            stacklevel=3,
        )


def ez_score(
    target_logp: np.ndarray,
    ref_logp: np.ndarray,
    token_ids: np.ndarray,
    argmax: np.ndarray,
    *,
    min_error_tokens: int = 2,
    skip_first: bool = False,
) -> float:
    """P / (P + N) over the target's error positions (see the module doc); NaN when undefined.

    All arrays have shape (T,): the scored tokens, the target's top-1 choices at each step.
    ``skip_first`` leaves position 0 out of E (the authors' ``ignore_bos``).
    """
    errors = np.asarray(argmax) != np.asarray(token_ids)
    if skip_first and len(errors):
        errors[0] = False
    if int(errors.sum()) < min_error_tokens:
        return float("nan")
    shift = (np.asarray(target_logp, np.float64) - np.asarray(ref_logp, np.float64))[errors]
    up = float(shift[shift > 0].sum())
    down = float(-shift[shift < 0].sum())
    return up / (up + down) if up + down > 0 else float("nan")


@register("ez_mia")
@dataclass(frozen=True)
class EzMia(PerReferenceAttack):
    token_aligned: ClassVar[bool] = True
    vocab_stats: ClassVar[bool] = False  # log p and the argmax only: vLLM serves it
    min_error_tokens: int = 2
    ignore_bos: bool = True  # the authors' default: the first scored position is not counted

    summary = (
        "Error-Zone score: upward vs downward log-prob shifts, target vs base model, at the "
        "positions the target predicts wrongly (needs --ref, same tokenizer)"
    )
    paper = (
        "Ilić, Stanojević & Cvejoski 2026, Powerful Training-Free Membership Inference Against "
        "Autoregressive Language Models (EZ-MIA), arXiv 2601.12104"
    )
    deviations = (
        "A text with fewer than min_error_tokens error positions, with no shift (P = N = 0) or "
        "with only upward shifts (N = 0) scores NaN, NaN and 1 here (the column is P / (P + N), "
        "the paper's P / N mapped monotonically to [0, 1]); the authors' code returns 0 for all "
        "three, ranking them as the least likely members.",
        "The first scored position (ignore_bos) is the first text token after imprint's start "
        "token; for a tokenizer that adds no BOS (GPT-2) the authors' first prediction is of "
        "the second token, so their positions are scored with --start-token none "
        "(start_token=none).",
    )

    def __post_init__(self) -> None:
        if not self.refs:
            raise ConfigError(
                "attack 'ez_mia' needs a reference model, ideally the target's pretrained base: "
                "--ref NAME=SPEC"
            )
        if self.min_error_tokens < 1:
            raise ConfigError(f"ez_mia min_error_tokens must be >= 1, got {self.min_error_tokens}")

    def columns(self) -> tuple[str, ...]:
        return tuple(f"ez_mia[{r}]" for r in self.refs)

    def score_signals(self, signals: SignalSet) -> dict[str, np.ndarray]:
        out = {}
        for r in self.refs:
            column = f"ez_mia[{r}]"
            out[column] = np.array(
                [
                    ez_score(
                        t.logp,
                        ref.logp,
                        t.token_ids,
                        t.argmax,
                        min_error_tokens=self.min_error_tokens,
                        skip_first=self.ignore_bos,
                    )
                    for t, ref in aligned_pairs(signals, r, attack=self.name)
                ],
                dtype=np.float64,
            )
            why = f"fewer than {self.min_error_tokens} error positions, or no shift"
            warn_undefined(self.name, column, int(np.isnan(out[column]).sum()), len(signals), why)
        return out
