"""The Python API given what a hurried or hostile caller passes: a value of the wrong type is
refused before any model loads, naming the option and the type it takes (never a TypeError
from deep inside, never a string read as True)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import imprint
from imprint.errors import ConfigError


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"model": 123}, "imprint.run(model=123): model takes a string or a path, not int"),
        ({"model": None}, "model takes a string or a path, not NoneType"),
        ({"data": None}, "data takes a string or a path, not NoneType"),
        ({"out": 5}, "out takes a path or None, not int"),
        ({"blind": "no"}, "imprint.run(blind='no'): blind takes True or False, not str"),
        ({"n_bootstrap": "20"}, "n_bootstrap takes an integer, not str"),
        ({"seed": True}, "seed takes an integer, not bool"),
        ({"n_per_label": 4.5}, "n_per_label takes an integer or None, not float"),
        ({"cache": 3}, "cache takes a path or None, not int"),
    ],
)
def test_a_wrong_type_is_refused_naming_the_option(options: dict, said: str) -> None:
    # before the fix: model=123 / data=None / n_bootstrap="20" raised TypeError or
    # AttributeError from deep inside, and blind="no" ran with the blind baseline on
    call = {"model": "smollm2-135m", "data": "wikimia:8", "attacks": "loss", **options}
    with pytest.raises(ConfigError) as err:
        imprint.run(**call)
    assert said in str(err.value)


def test_paths_and_none_where_allowed_pass_the_type_check() -> None:
    from imprint.run.simple import _check_types

    _check_types({"model": Path("m"), "data": Path("d x.jsonl"), "out": "runs/a b",
                  "n_per_label": None, "cache": Path("c"), "blind": False, "seed": 0,
                  "on_bad": "drop", "n_bootstrap": np.int64(50)})  # fmt: skip


def test_an_attack_list_with_spaces_only_is_one_unknown_name_not_letters() -> None:
    with pytest.raises(ConfigError, match="unknown attack 'loss zlib'; did you mean"):
        imprint.run(model="smollm2-135m", data="wikimia:8", attacks="loss zlib")


def test_an_interval_formats_its_estimate_as_float_reads_it() -> None:
    from imprint.metrics import Interval

    auc = Interval(0.71234, 0.6, 0.8)
    # before: TypeError "unsupported format string passed to Interval.__format__"
    assert f"{auc:.3f}" == "0.712" == f"{float(auc):.3f}"
    assert f"{auc}" == str(auc)  # no spec: the whole interval, as before
    assert f"{Interval(float('nan'), float('nan'), float('nan')):.2f}" == "nan"


@pytest.mark.parametrize("version", ["١.٠", "1.0.0", "v1.0", "1", "", "２.0"])
def test_a_format_version_that_is_not_ascii_major_minor_is_refused(version: str) -> None:
    from imprint.errors import DataError
    from imprint.formats import check_format

    # before: Arabic-Indic and full-width digits matched \d and were read as version 1 or 2
    with pytest.raises(DataError, match="is not MAJOR.MINOR"):
        check_format({"format_version": version}, "metrics.json")
