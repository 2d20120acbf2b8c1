"""The benchmark catalog is a lazy source (issue 33): its built-in entries are read when the
catalog is first looked up or listed, and importing the module that holds them registers
nothing (imprint.registry's rule: nothing registers itself by being imported)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_importing_the_built_in_entries_registers_nothing() -> None:
    lines = _run(
        """
        import imprint.data.catalog_entries as entries  # imprint.data with it
        from imprint.data import catalog
        print(len(catalog._CATALOG._slots))  # nothing registered by the imports
        print(catalog.get_benchmark('wikimia:32').family, catalog.benchmark_origin('wikimia:32'))
        print(len(catalog._CATALOG._slots) == len(entries.builtin_benchmarks()))  # read on use
        """
    )
    assert lines == ["0", "wikimia built-in", "True"]


def test_a_built_in_name_is_taken_before_the_catalog_was_read() -> None:
    lines = _run(
        """
        from imprint.data import catalog
        from imprint.errors import ConfigError
        entry = catalog.BenchmarkEntry(
            name='wikimia:32', family='wikimia', description='mine', provenance='', licence='',
            size='', fields='', caveats=(), files=(catalog.DataFile(local='x.jsonl'),),
        )
        try:
            catalog.register_benchmark(entry)
        except ConfigError as err:
            print('refused', 'already registered' in str(err))
        catalog.register_benchmark(entry, force=True)
        print(catalog.get_benchmark('wikimia:32').description)
        print([e.name for e in catalog.iter_benchmarks()][0])  # WikiMIA first, as before
        """
    )
    assert lines == ["refused True", "mine", "wikimia:32"]
