"""``imprint ARGS`` as a CI log sees it: a real process, stdout and stderr pipes, no COLUMNS."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def imprint_piped(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``python -m imprint ARGS`` in ``cwd`` with piped output and no COLUMNS."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "imprint", *map(str, args)],
        capture_output=True, text=True, env=env, cwd=cwd, timeout=600,
    )  # fmt: skip
