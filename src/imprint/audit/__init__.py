"""Privacy auditing: empirical epsilon lower bounds from membership guesses on canaries.

:mod:`.bounds` holds the statistics (Steinke et al. 2023's one-run bound, the many-run
Clopper-Pearson bound), :mod:`.canaries` the one-run canary design (a seeded inclusion draw per
canary, the canary file and its secret mask), :mod:`.audit` scores canaries through the normal
run machinery and reports the bound. Nothing heavy is imported here.
"""

from imprint.audit.bounds import (
    OneRunBound,
    clopper_pearson_upper,
    multi_run_epsilon,
    one_run_bound,
    one_run_epsilon,
    one_run_guesses,
    one_run_p_value,
)

__all__ = [
    "OneRunBound",
    "clopper_pearson_upper",
    "multi_run_epsilon",
    "one_run_bound",
    "one_run_epsilon",
    "one_run_guesses",
    "one_run_p_value",
]
