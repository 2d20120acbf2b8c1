"""Requests a black-box run sends to an HTTP target, said before the work.

:func:`request_counts` counts, per attack, the requests its sampling calls make (before the
store answers any) from the attack's own settings and the texts, at ``c`` choices per request:
SaMIA and n-gram coverage ``texts x ceil(N / c)``; SimMIA (text disclosure) ``2 x sum over texts
of (words - 1) x ceil(N / c)`` (its next words after x_<i and after P + x_<i: about 11,700 for 40
WikiMIA-32 texts at N = 5 on a one-choice server); PETAL one greedy token per surrogate token
(estimated as 1.3 per word); DE-COP one question per ordering plus 3 paraphrases when the target
writes them. :func:`plan_lines` says them, with the choices per request learned by an earlier run
against this server, or both figures (as asked, and at one choice) when none is known yet; the
backend says the time once its first answers are timed (:meth:`OpenAICompatibleBackend.
estimate_line`). For the gray-box backend (``openai-logprobs``) it says one request per text and
log-prob pass (lowercase, ReCaLL and CON-ReCall add passes), and, on a shifted server, up to twice
that. Attacks are read by name and field (no import of ``imprint.attacks``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from imprint.data.words import split_words

__all__ = ["plan_lines", "request_counts"]


def _per_text(attack: Any, texts: Sequence[str], c: int) -> int | None:
    name = getattr(attack, "name", "")
    n = int(getattr(attack, "n_samples", 1) or 1)
    if name in ("samia", "ngram_coverage"):
        return len(texts) * math.ceil(n / c)
    if name == "simmia" and getattr(attack, "disclosure", "text") == "text":
        positions = sum(max(len(split_words(t)) - 1, 0) for t in texts)
        return 2 * positions * math.ceil(n / c)
    if name == "petal":
        return sum(max(round(1.3 * len(t.split())) - 1, 0) for t in texts)
    if name == "de_cop":
        own = getattr(attack, "paraphraser", "target") == "target" and not getattr(
            attack, "paraphrase_fields", None
        )
        return len(texts) * (int(getattr(attack, "n_orderings", 24)) + (3 if own else 0))
    return None


def request_counts(
    attacks: Sequence[Any], texts: Sequence[str], choices_per_request: int
) -> dict[str, int | None]:
    """Attack name -> HTTP requests it sends for ``texts`` (None: not estimated)."""
    c = max(1, choices_per_request)
    return {a.name: _per_text(a, texts, c) for a in attacks}


def plan_lines(attacks: Sequence[Any], texts: Sequence[str], backend: Any) -> list[str]:
    """The plan's HTTP lines for ``backend`` ([] when it is not an HTTP text client); sets
    ``backend.planned_requests`` so its time estimate covers the whole run."""
    if getattr(backend, "forms_probed", None) is not None:  # the gray-box HTTP backend
        return _logprob_lines(attacks, texts, backend)
    limits = getattr(backend, "limits", None)
    if limits is None or not hasattr(backend, "max_n_per_request"):
        return []
    backend.start()  # GET /v1/models: a wrong model name is refused here, before the work
    known = limits.choices if limits.choices_checked else None
    asked = request_counts(attacks, texts, known or backend.max_n_per_request)
    single = request_counts(attacks, texts, 1)
    counted = {k: v for k, v in asked.items() if v is not None}
    if not counted:
        return []
    total, total_single = sum(counted.values()), sum(v or 0 for v in single.values())
    backend.planned_requests = total if known else total_single
    per = ", ".join(f"{k} {v:,}" for k, v in counted.items())
    where = f"{backend.name} at {backend.base_url}"
    if known:
        how = f"at {known} choice(s) per request (learned from this server by an earlier run)"
        return [f"HTTP requests to {where}: {per}; {total:,} in all, {how}"]
    line = f"HTTP requests to {where}: {per}; {total:,} in all if the server honours n"
    if total_single != total:
        line += f", {total_single:,} if it returns one choice per request (many servers do)"
    left = [k for k, v in asked.items() if v is None]
    if left:
        line += f"; not counted: {', '.join(left)}"
    return [line + "; the time is said after the first answers"]


#: log-prob passes per text beyond the plain one that every per-token attack shares
_EXTRA_PASSES = {"lowercase": 1, "recall": 1, "con_recall": 2}


def _logprob_lines(attacks: Sequence[Any], texts: Sequence[str], backend: Any) -> list[str]:
    """The gray-box backend's requests: one per text and log-prob pass (the probe is done)."""
    names = [getattr(a, "name", "") for a in attacks]
    passes = 1 + sum(_EXTRA_PASSES.get(n, 0) for n in names)
    n = len(texts) * passes
    opts = backend.options
    line = (
        f"HTTP log-prob requests to {backend.name} at {backend.base_url} ({backend.mode}): "
        f"{len(texts):,} text(s) x {passes} pass(es) = {n:,}, plus 1 per distinct context"
    )
    if (
        backend.alignment is not None
        and backend.alignment.shift
        and (opts.top_logprobs < opts.max_top_logprobs)
    ):
        line += (
            f"; up to {2 * n:,} on this shifted server (a text whose token is not among "
            f"{opts.top_logprobs} candidates is asked again with {opts.max_top_logprobs})"
        )
    return [line]
