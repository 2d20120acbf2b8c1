"""Privacy auditing: empirical epsilon lower bounds from membership guesses on canaries.

:mod:`.bounds` holds the statistics (Steinke et al. 2023's one-run bound, the many-run
Clopper-Pearson bound), :mod:`.canaries` the one-run canary design (a seeded inclusion draw per
canary, the canary file and its secret mask), :mod:`.audit` scores canaries through the normal
run machinery and reports the bound. Nothing heavy is imported here.
"""

# the package's names are the statistics module's own, listed once there
from imprint.audit.bounds import *  # noqa: F403
from imprint.audit.bounds import __all__ as __all__
