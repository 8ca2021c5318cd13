"""Every tool ends an unexpected internal failure (a bug) with one line naming the file, the
node or op and the exception, and exit status 2 (bad input stays 1); MONET_DEBUG=1 adds the
traceback. Bugs are injected by replacing a converter, the cost model or a kernel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"
MLP = str(DATA / "models" / "mlp_b4.onnx")

BREAK_RELU_IMPORT = """
from monet_ir.frontend import onnx_ops
def broken(imp, node):
    raise ZeroDivisionError("boom")
onnx_ops.CONVERTERS[("", "Relu")] = broken
"""
BREAK_COST_MODEL = """
import monet_ir.cost as cost
def broken(sig, core):
    raise KeyError("no such level")
cost.cost_of = broken
"""
BREAK_AUTODIFF = """
from passes import autodiff
from dialects import nn
def broken(d, op, dys, wanted):
    raise IndexError("rule out of range")
autodiff.RULES[nn.ReluOp] = broken
"""


def run_tool(tool: str, patch: str, *args: str, debug: bool = False) -> subprocess.CompletedProcess:
    module = {"monet": "monet", "monet-opt": "monet_opt", "monet-run": "monet_run"}[tool]
    code = f"{patch}\nimport sys\nfrom monet_ir.tools.{module} import main\nmain(sys.argv[1:])\n"
    env = dict(os.environ)
    env.pop("MONET_DEBUG", None)
    if debug:
        env["MONET_DEBUG"] = "1"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)


def assert_one_internal_line(run: subprocess.CompletedProcess, *fragments: str) -> None:
    assert run.returncode == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if not line.startswith("[")]
    assert len(errors) == 1, run.stderr
    assert "internal error" in errors[0] and "Traceback" not in run.stderr
    for fragment in fragments:
        assert fragment in errors[0]


@pytest.mark.parametrize("tool,args", [
    ("monet", ("report", MLP, "--target", "edge_npu", "--out", "OUT", "--no-plots")),
    ("monet-opt", (MLP,)),
    ("monet-run", (MLP, "--out", "OUT/o.npz")),
])
def test_a_converter_bug_names_file_node_and_exception(tool, args, tmp_path):
    args = tuple(a.replace("OUT", str(tmp_path)) for a in args)
    run = run_tool(tool, BREAK_RELU_IMPORT, *args)
    assert_one_internal_line(run, "mlp_b4.onnx: node '/Relu' (ai.onnx::Relu)", "ZeroDivisionError: boom")


def test_a_cost_model_bug_names_the_op(tmp_path):
    run = run_tool("monet", BREAK_COST_MODEL, "report", MLP, "--target", "edge_npu", "--out", str(tmp_path))
    assert_one_internal_line(run, "op nn.", "(node '", "KeyError")


def test_an_autodiff_bug_names_the_op(tmp_path):
    run = run_tool("monet", BREAK_AUTODIFF, "report", MLP, "--target", "edge_npu", "--out", str(tmp_path))
    assert_one_internal_line(run, "autodiff of nn.relu (node '/Relu')", "IndexError: rule out of range")


def test_monet_debug_shows_the_traceback(tmp_path):
    run = run_tool("monet", BREAK_RELU_IMPORT, "report", MLP, "--target", "edge_npu", "--out", str(tmp_path),
                   debug=True)
    assert run.returncode == 2
    assert "Traceback" in run.stderr and "in broken" in run.stderr and "\nZeroDivisionError: boom\n" in run.stderr


def test_bad_input_still_exits_1(tmp_path):
    run = run_tool("monet", "", "report", str(tmp_path / "missing.onnx"), "--target", "edge_npu",
                   "--out", str(tmp_path))
    assert run.returncode == 1 and "internal error" not in run.stderr


def test_a_reader_closing_the_pipe_is_not_an_internal_error():
    # `monet targets | head -1`: the reader goes away before the tool writes (it is still importing)
    code = "import sys\nfrom monet_ir.tools.monet import main\nmain(sys.argv[1:])\n"
    child = subprocess.Popen([sys.executable, "-c", code, "targets"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()
    _, err = child.communicate(timeout=60)
    assert child.returncode == 141, err
    assert b"internal error" not in err and b"Traceback" not in err
