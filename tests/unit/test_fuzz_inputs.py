"""Fuzzed ONNX files never make a tool print a traceback.

Seeded mutations of the corpus, of the bundled and test models and of ../shared's workloads
(when present): the file truncated, bytes flipped, a node dropped, an input renamed. Each
mutated file goes through `monet-opt` (import, verify, print), every fourth one also through
`monet report` (autodiff, Adam, costing, scheduling) and every other fourth one through
`monet-run` (the numpy interpreter; weight-stripped files stop at their missing data), in-process. A tool must either succeed
(exit 0: the mutation left a valid model) or reject the file with one `<tool>: error: ...` line
per problem (exit 1); exit 2 (a bug in MONET) and any traceback fail the test.
"""

from __future__ import annotations

import contextlib
import io
import random
from pathlib import Path

import pytest

from conftest import SHARED

REPO = Path(__file__).resolve().parents[2]
SEED = 20261125
CASES = 320
KINDS = ("truncate", "flip", "drop_node", "rename_input")


def sources() -> list[Path]:
    """The smaller files of every collection (the mutations matter, not the model's size)."""
    corpus = sorted((REPO / "tests" / "data" / "corpus").glob("*.onnx"), key=lambda p: (p.stat().st_size, p.name))
    files = corpus[:20] + sorted((REPO / "tests" / "data").glob("models/*.onnx"))
    files += sorted((REPO / "tests" / "data").glob("ort/*.onnx")) + sorted((REPO / "examples" / "models").glob("*.onnx"))
    shared = SHARED / "models"
    if shared.is_dir():
        files += sorted(p for p in shared.rglob("*.onnx") if p.stat().st_size < 400_000)
    return files


def mutate(data: bytes, kind: str, rng: random.Random) -> bytes:
    if kind == "truncate":
        return data[: rng.randrange(0, len(data))]
    if kind == "flip":
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        return bytes(out)
    import onnx

    model = onnx.ModelProto()
    model.ParseFromString(data)
    nodes = model.graph.node
    if kind == "drop_node" and len(nodes):
        del nodes[rng.randrange(len(nodes))]
    elif kind == "rename_input" and len(nodes):
        node = nodes[rng.randrange(len(nodes))]
        if len(node.input):
            node.input[rng.randrange(len(node.input))] = f"renamed_{rng.randrange(1000)}"
    return model.SerializeToString()


def run_tool(main, argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return code, err.getvalue()


def check(tool: str, code: int, stderr: str, what: str) -> None:
    assert "Traceback" not in stderr, f"{what}: {tool} printed a traceback:\n{stderr}"
    assert code in (0, 1), f"{what}: {tool} exit status {code}:\n{stderr}"
    if code == 1:
        lines = [line for line in stderr.splitlines() if not line.startswith("[")]  # progress lines
        assert lines and all(line.startswith(f"{tool}: error: ") for line in lines), f"{what}:\n{stderr}"


def test_fuzzed_files_never_give_a_traceback(tmp_path):
    from monet_ir.tools.monet import main as monet
    from monet_ir.tools.monet_opt import main as monet_opt
    from monet_ir.tools.monet_run import main as monet_run

    files = sources()
    assert len(files) >= 20
    rng = random.Random(SEED)
    outcomes = {0: 0, 1: 0}
    for i in range(CASES):
        source = files[rng.randrange(len(files))]
        kind = KINDS[i % len(KINDS)]
        mutated = tmp_path / f"case{i}_{kind}_{source.name}"
        mutated.write_bytes(mutate(source.read_bytes(), kind, rng))
        what = f"case {i}: {kind} of {source.name}"
        code, stderr = run_tool(monet_opt, [str(mutated)])
        check("monet-opt", code, stderr, what)
        outcomes[code] += 1
        if i % 4 == 0:
            code, stderr = run_tool(monet, ["report", str(mutated), "--target", "edge_npu", "--no-plots",
                                            "--out", str(tmp_path / f"out{i}")])
            check("monet", code, stderr, what)
        elif i % 4 == 2:
            code, stderr = run_tool(monet_run, [str(mutated), "--out", str(tmp_path / f"run{i}.npz")])
            check("monet-run", code, stderr, what)
        mutated.unlink()
    # the mutations exercise both outcomes: rejected files and still-valid ones
    assert outcomes[1] > CASES // 4 and outcomes[0] > 0, outcomes


@pytest.mark.parametrize("kind", KINDS)
def test_mutations_change_the_file(kind):
    data = (REPO / "tests" / "data" / "models" / "mlp_b4.onnx").read_bytes()
    rng = random.Random(1)
    assert any(mutate(data, kind, rng) != data for _ in range(5))
