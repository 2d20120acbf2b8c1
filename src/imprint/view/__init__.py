"""``imprint view``: a local, offline browser over run, document-run, game, audit and study
folders (an index of them, a page per run with every text's scores, two runs side by side).

The pages are static HTML built with jinja2 from the folders' own files, read through the same
loaders the rest of imprint uses (:func:`imprint.evaluation.results.read_metrics`,
:func:`imprint.diagnostics.runs.read_run`, the game's and the study's readers); every script and
style sheet ships in this package (``assets/``), so nothing is fetched from the network. The
standard library's HTTP server serves them on 127.0.0.1 (:mod:`.server`); the comparison of two
runs is computed when it is first asked for (:func:`imprint.diagnostics.runs.compare_runs`).
"""

from __future__ import annotations
