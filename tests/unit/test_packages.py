"""The generic top-level package names must resolve to this repository, not another install."""

import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("package", ["dialects", "passes", "targets", "monet_ir"])
def test_package_resolves_to_this_repository(package):
    module = importlib.import_module(package)
    assert Path(module.__file__).resolve().parent == REPO / package


def test_xdsl_is_the_pinned_version():
    import xdsl
    from importlib.metadata import version

    pinned = next(
        line.split("==")[1].strip('",')
        for line in (REPO / "pyproject.toml").read_text().splitlines()
        if line.strip().startswith('"xdsl==')
    )
    assert version("xdsl") == pinned
    assert xdsl.__name__ == "xdsl"


def test_dialect_and_pass_modules_do_not_import_heavy_packages():
    import subprocess
    import sys

    code = (
        "import sys, dialects.nn, dialects.grad, dialects.train, passes, monet_ir.tools.monet_opt;"
        "heavy = [m for m in ('onnx', 'numpy', 'yaml', 'matplotlib') if m in sys.modules];"
        "print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == ""
