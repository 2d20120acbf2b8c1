"""The orchestrator: one run from what the user asked to the written run folder.

- :mod:`.config`: :class:`RunConfig`, what the user asked (models with their options, data,
  attacks, evaluation, output);
- :mod:`.plan`: :func:`resolve` -> :class:`RunPlan`, everything that follows from it, computed
  once (providers, references, access level, typed parameters); loading models and executors;
- :mod:`.inputs`: the data stage (samples, documents, shot pools, reference ids);
- :mod:`.score`: the scoring stage (models, attack set-up, scores, the models' manifest entries);
- :mod:`.execute`: :func:`execute_run`, the stages in order (data, scoring, evaluation, report);
- :mod:`.manifest`: the run's manifest;
- :mod:`.folder`: :func:`load_run`, a finished run folder read back (scores as a DataFrame);
- :mod:`.simple`: :func:`simple_run`, one call from Python to a loaded run. The package itself
  is callable, ``imprint.run(model=..., data=..., attacks=[...])`` calling it, so the name
  ``imprint.run`` is both this package and that function.

Games and experiment grids use runs through this package; it imports neither of them.
"""

import sys
import types
from typing import Any

from imprint.run.config import RunConfig
from imprint.run.execute import RunResult, execute_run
from imprint.run.folder import Run, load_run
from imprint.run.inputs import check_breakdown, load_samples
from imprint.run.plan import RunPlan, load_backends, resolve, run_executor

__all__ = [
    "RunConfig",
    "RunPlan",
    "RunResult",
    "Run",
    "check_breakdown",
    "execute_run",
    "load_backends",
    "load_run",
    "load_samples",
    "resolve",
    "run_executor",
    "simple_run",
]


def simple_run(*args: Any, **kwargs: Any) -> Run:
    """:func:`imprint.run.simple.simple_run` (what ``imprint.run(...)`` calls)."""
    from imprint.run.simple import simple_run as run

    return run(*args, **kwargs)


class _CallableModule(types.ModuleType):
    """This package, callable: ``imprint.run(model=..., data=..., attacks=[...])`` is
    :func:`simple_run`, while ``imprint.run.RunConfig`` and its modules stay where they are."""

    def __call__(self, *args: Any, **kwargs: Any) -> Run:
        return simple_run(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
