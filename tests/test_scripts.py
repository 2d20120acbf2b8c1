"""The README's set-up commands: the test command's set-up installs the browser the tests need."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _fake_tools(bin_dir: Path, log: Path) -> None:
    """An ``apt-get`` that records its arguments and 'installs' chromium; an ``id`` saying root."""
    bin_dir.mkdir()
    (bin_dir / "apt-get").write_text(
        "#!/bin/bash\n"
        f'echo "$@" >> {log}\n'
        f'if [ "$1" = install ]; then printf "#!/bin/bash\\n" > {bin_dir}/chromium; '
        f"/bin/chmod +x {bin_dir}/chromium; fi\n"
    )
    (bin_dir / "id").write_text("#!/bin/bash\necho 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)


def _run_installer(bin_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{bin_dir}:/nonexistent"}
    return subprocess.run(
        ["/bin/bash", str(ROOT / "scripts" / "install-browser")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_install_browser_installs_chromium_when_missing(tmp_path: Path) -> None:
    log = tmp_path / "apt.log"
    _fake_tools(tmp_path / "bin", log)
    first = _run_installer(tmp_path / "bin")
    assert first.returncode == 0, first.stderr
    assert "install -y -qq chromium" in log.read_text()
    # a second call finds chromium and asks apt nothing
    log.unlink()
    second = _run_installer(tmp_path / "bin")
    assert second.returncode == 0 and not log.exists()


def test_setup_installs_the_browser_without_flags() -> None:
    """The README's test command is ``./scripts/setup --served && ./scripts/test``: set-up must
    reach the browser installer whatever its arguments (it was once behind ``--browser``)."""
    lines = [ln.strip() for ln in (ROOT / "scripts" / "setup").read_text().splitlines()]
    calls = [ln for ln in lines if "install-browser" in ln and not ln.startswith("#")]
    assert calls == ["scripts/install-browser"], calls
    readme = (ROOT / "README.md").read_text()
    assert "./scripts/setup --served && ./scripts/test" in readme
