"""Texts a served model cannot score are said on the terminal (issue 36, tester): with
ambiguous=resolve_or_drop five of ten texts (Chinese, Russian, emoji, combining marks, Arabic on
llama-cpp-python) were left out with only the manifest and the report's table saying so; the
terminal's plan line counted the three texts kept and never mentioned the others."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from imprint.backends.ambiguous_tokens import drop_unscorable

REASON = "a token the server renders as empty text (bytes of a split character)"


@dataclass
class _Text:
    id: str
    text: str


class _Served:
    """The two members drop_unscorable reads of a served backend: which texts it cannot score
    (index -> reason) and the ids it keeps for its manifest entry."""

    def __init__(self) -> None:
        self.dropped_ids: dict[str, list[str]] = {}

    def unscorable(self, texts: list[str]) -> dict[int, str]:
        return {n: REASON for n, t in enumerate(texts) if not t.isascii()}


def test_each_text_left_out_is_counted_and_named_on_the_terminal(caplog) -> None:
    texts = ["北京是首都。", "Москва.", "Paris is big.", *[f"é{n}" for n in range(6)]]
    samples = [_Text(f"d:{n + 1}", t) for n, t in enumerate(texts)]
    dropped: dict[str, int] = {}
    backend = _Served()
    with caplog.at_level(logging.WARNING):
        kept = drop_unscorable(backend, samples, dropped)
    assert [s.id for s in kept] == ["d:3"] and dropped == {REASON: 8}
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "left out 8 of 9 texts" in said and REASON in said
    assert "d:1, d:2, d:4, d:5, d:6, ... (3 more)" in said
    assert len(backend.dropped_ids[REASON]) == 8  # every id in the manifest entry
