"""The orchestrator: one run from what the user asked to the written run folder.

- :mod:`.config`: :class:`RunConfig`, what the user asked (models with their options, data,
  attacks, evaluation, output);
- :mod:`.plan`: :func:`resolve` -> :class:`RunPlan`, everything that follows from it, computed
  once (providers, references, access level, typed parameters); loading models and executors;
- :mod:`.inputs`: the data stage (samples, documents, shot pools, reference ids);
- :mod:`.score`: the scoring stage (models, attack set-up, scores, the models' manifest entries);
- :mod:`.execute`: :func:`execute_run`, the stages in order (data, scoring, evaluation, report);
- :mod:`.manifest`: the run's manifest.

Games and experiment grids use runs through this package; it imports neither of them.
"""

from imprint.run.config import RunConfig
from imprint.run.execute import RunResult, execute_run
from imprint.run.inputs import check_breakdown, load_samples
from imprint.run.plan import RunPlan, load_backends, resolve, run_executor

__all__ = [
    "RunConfig",
    "RunPlan",
    "RunResult",
    "check_breakdown",
    "execute_run",
    "load_backends",
    "load_samples",
    "resolve",
    "run_executor",
]
