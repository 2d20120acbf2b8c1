"""The attacks a prompt-log-prob target serves, as the docs list them, are those the refusal of
a full-vocabulary attack names as served (issue 36 item 6: the error named ``qmia``, which reads
only LL(x) and is served, while the docs left it out)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from imprint.attacks.base import _refuse_vocab_attacks
from imprint.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def _named_as_served() -> set[str]:
    with pytest.raises(ConfigError) as err:
        _refuse_vocab_attacks(["min_k_pp"])
    served = " ".join(str(err.value).split()).split("or choose from ", 1)[1]
    return set(re.findall(r"[a-z_]+", served.split(" and the black-box attacks", 1)[0]))


def _listed(page: str, start: str, end: str) -> set[str]:
    text = " ".join((ROOT / page).read_text(encoding="utf-8").split())
    part = text.split(start, 1)[1].split(end, 1)[0]
    return set(re.findall(r"`([a-z_]+)`", part))


def test_the_gray_box_page_lists_the_attacks_the_error_names():
    listed = _listed("docs/served/graybox.md", "reads only per-token log p:", "imprint reads")
    assert listed == _named_as_served()


def test_the_models_guide_lists_them_for_vllm():
    listed = _listed("docs/guide/models.md", "read only per-token log p:", ")")
    assert listed == _named_as_served() - {"min_k_pp_topk"}  # needs the HTTP backend's top-k
