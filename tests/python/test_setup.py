# SPDX-License-Identifier: Apache-2.0
"""scripts/setup on a stock Debian machine: with Debian's own, externally managed
python3 first on the PATH it must install into the project's .venv/ and put it
first on the PATH (pip-installing into the system Python fails under PEP 668)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_setup_uses_the_project_venv_with_debian_python_first_on_the_path():
    if not list(Path("/usr/lib").glob("python3*/EXTERNALLY-MANAGED")) or not Path("/usr/bin/python3").exists():
        pytest.skip("no externally managed Debian python3 on this machine")
    if not (REPO / ".venv").is_dir():
        pytest.skip("no .venv yet: bash scripts/test or bash scripts/main creates it")
    script = 'export PATH="/usr/bin:$PATH"; source scripts/setup >/dev/null; command -v python3 mlakv; '
    script += 'python3 -c "import sys; print(sys.prefix)"'
    result = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    venv = REPO / ".venv"
    assert result.stdout.split() == [str(venv / "bin" / "python3"), str(venv / "bin" / "mlakv"), str(venv)]
