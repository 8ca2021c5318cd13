"""Runs the lit/FileCheck suite (tests/lit) so that one pytest command runs everything."""

import os
import subprocess
import sys
from pathlib import Path

LIT_DIR = Path(__file__).resolve().parents[1] / "lit"


def test_lit_suite():
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["MONET_PYTHON"] = sys.executable
    # PyPI's lit has no __main__ module; call its entry point
    cmd = [sys.executable, "-c", "from lit.main import main; main()", "-sv", str(LIT_DIR)]
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stdout[-20000:] + result.stderr[-5000:]
