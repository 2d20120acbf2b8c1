"""Experiment grids: models x benchmarks x attacks x options, run through the shared cache and
written as the papers' tables (``imprint experiment FILE.yaml``).

- :mod:`.spec`: the YAML file read into validated frozen dataclasses;
- :mod:`.cells`: cell keys and the atomic, one-file-per-cell store;
- :mod:`.grid`: the grid runner (each cell an ordinary :mod:`imprint.run` run);
- :mod:`.tables`, :mod:`.table_render`: tables, CSV/Markdown/LaTeX/HTML, ``cells.parquet``.
"""

from imprint.study.spec import StudySpec, load_spec, parse_spec

__all__ = ["StudySpec", "load_spec", "parse_spec"]
