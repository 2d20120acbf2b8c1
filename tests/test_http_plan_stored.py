"""The gray-box plan line says what the store already answers (issue 36 item 6): a fully stored
rerun printed "27 text(s) x 1 pass(es) = 27 ...; up to 54 on this shifted server" and sent
none."""

from __future__ import annotations

from types import SimpleNamespace

from imprint.attacks.base import get_attack_class
from imprint.run.http_plan import plan_lines

SHIFTED = SimpleNamespace(
    forms_probed=("echo",),
    name="target",
    base_url="http://127.0.0.1:8000/v1",
    mode="echo",
    options=SimpleNamespace(top_logprobs=5, max_top_logprobs=49152),
    alignment=SimpleNamespace(shift=1),
)
TEXTS = [f"text {i}" for i in range(27)]


def test_a_fully_stored_rerun_says_it_sends_nothing():
    (line,) = plan_lines([get_attack_class("loss")()], TEXTS, SHIFTED, stored=27)
    assert "= 27, all answered by the store: none is sent" in line
    assert "up to" not in line


def test_a_partly_stored_run_counts_only_the_rest_as_sent():
    (line,) = plan_lines([get_attack_class("loss")()], TEXTS, SHIFTED, stored=20)
    assert "= 27, 20 answered by the store, so 7 to send" in line
    assert "up to 14 on this shifted server" in line


def test_unchecked_the_line_is_as_before():
    (line,) = plan_lines([get_attack_class("loss")()], TEXTS, SHIFTED)
    assert "= 27, plus 1 per distinct context; up to 54" in line
