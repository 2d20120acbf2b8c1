"""The evaluation step of a run, between attacks and the report: every figure and warning,
computed once, as typed results (:class:`RunMetrics`, the content of ``metrics.json``).

- :mod:`.evaluate`: score columns with bootstrap intervals, the blind (model-less) suite,
  breakdown groups, paired comparisons and the run's warnings;
- :mod:`.documents`: the document-level figures of a ``--unit document`` run (mean and Shi et
  al. aggregation, Meeus et al., the blind baseline on whole documents, dataset inference);
- :mod:`.results`, :mod:`.columns`, :mod:`.blind_results`, :mod:`.document_results`: the typed
  results and their JSON form; :func:`read_metrics` reads a run folder's back.

:mod:`imprint.report` only renders what this returns.
"""

from imprint.evaluation.evaluate import evaluate_scores
from imprint.evaluation.results import RunMetrics, RunWarning, WarningKind, read_metrics

__all__ = ["RunMetrics", "RunWarning", "WarningKind", "evaluate_scores", "read_metrics"]
