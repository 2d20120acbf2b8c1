"""Requests a black-box run sends to an HTTP target, said before the work.

:func:`request_counts` counts, per attack, the requests its calls send to the target (before the
store answers any), read off the calls each attack declares (``planned_requests``, the typed
requests it executes; :func:`imprint.requests.plan.http_requests`), at ``c`` choices per
request: ``ceil(N / c)`` per distinct sample request of ``N`` continuations (SaMIA and n-gram
coverage one per text; SimMIA with text disclosure one per word position of each text, without
and with its shot prefix: about 11,700 for 40 WikiMIA-32 texts at N = 5 on a one-choice server),
one per paraphrase, plus what the attack estimates for calls known only from the answers
(PETAL's greedy tokens, DE-COP's questions). :func:`plan_lines` says them, with the choices per
request learned by an earlier run against this server, or both figures (as asked, and at one
choice) when none is known yet; the backend says the time once its first answers are timed
(:meth:`OpenAICompatibleBackend.estimate_line`). For the gray-box backend
(``openai-logprobs``) it says one request per text and log-prob pass of the attacks' needs,
and, on a shifted server, up to twice that; of them, those the store already answers are said
apart and never counted as sent (a fully stored rerun sends none).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from imprint.requests.plan import http_requests

__all__ = ["plan_lines", "request_counts"]


def request_counts(
    attacks: Sequence[Any], texts: Sequence[str], choices_per_request: int
) -> dict[str, int | None]:
    """Attack name -> HTTP requests it sends to the target for ``texts`` (None: not estimated),
    for the attacks that send it any."""
    out: dict[str, int | None] = {}
    for attack in attacks:
        n = http_requests(attack.planned_requests(texts, target_local=False), choices_per_request)
        if n != 0:
            out[attack.name] = n
    return out


def plan_lines(
    attacks: Sequence[Any], texts: Sequence[str], backend: Any, stored: int | None = None
) -> list[str]:
    """The plan's HTTP lines for ``backend`` ([] when it is not an HTTP text client); sets
    ``backend.planned_requests`` so its time estimate covers the whole run. ``stored``: the
    target's log-prob requests the store already answers (None: not checked)."""
    if getattr(backend, "forms_probed", None) is not None:  # the gray-box HTTP backend
        return _logprob_lines(attacks, texts, backend, stored)
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


def _logprob_lines(
    attacks: Sequence[Any], texts: Sequence[str], backend: Any, stored: int | None
) -> list[str]:
    """The gray-box backend's requests: one per text and log-prob pass of the attacks' needs of
    the target (each distinct need once; the probe is done), less those the store answers."""
    needs = dict.fromkeys(n for a in attacks for n in a.needs() if n.model == "target")
    passes = max(len(needs), 1)
    n = len(texts) * passes
    opts = backend.options
    where = f"HTTP log-prob requests to {backend.name} at {backend.base_url} ({backend.mode})"
    asked = f"{len(texts):,} text(s) x {passes} pass(es) = {n:,}"
    left = n if stored is None else max(n - stored, 0)
    if left == 0:
        return [f"{where}: {asked}, all answered by the store: none is sent"]
    held = f", {n - left:,} answered by the store, so {left:,} to send" if left < n else ""
    line = f"{where}: {asked}{held}, plus 1 per distinct context"
    if (
        backend.alignment is not None
        and backend.alignment.shift
        and (opts.top_logprobs < opts.max_top_logprobs)
    ):
        line += (
            f"; up to {2 * left:,} on this shifted server (a text whose token is not among "
            f"{opts.top_logprobs} candidates is asked again with {opts.max_top_logprobs})"
        )
    return [line]
