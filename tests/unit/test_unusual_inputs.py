"""Valid-but-unusual files are accepted and malformed ones refused in one line (issue 29).

`tests/data/unusual/generate.py` writes, from a seed, small ONNX models in both PyTorch
exporters' idioms with a random mix of what is unusual but legal (opsets 13..21, empty optional
inputs, initializers as inputs, symbolic dimensions, scalars, unusual names, external data...),
Stream systems, ZigZag cores and our own targets with optional fields left out, and one
malformed variant of each. Every valid model imports (every fourth also goes through `monet
report`), every valid target loads; every malformed file makes the tool print exactly one
`<tool>: error: <file>: ...` line holding what the mutation must be named by, exit status 1,
no traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "data" / "unusual"))

import generate  # noqa: E402
from test_fuzz_inputs import run_tool  # noqa: E402

SEED = 2029


def outcome(case: generate.Case, out: Path) -> str | None:
    """None when the tools treat `case` as they must, else what went wrong."""
    from monet_ir.tools.monet import main as monet
    from monet_ir.tools.monet_opt import main as monet_opt

    dims = [arg for name, value in case.dims.items() for arg in ("--dim", f"{name}={value}")]
    if case.kind == "onnx" and case.valid:
        code, err = run_tool(monet_opt, [case.path, *dims])
        if code != 0:
            return f"refused: {err.strip()}"
        if case.report:
            code, err = run_tool(monet, ["report", case.path, "--target", "edge_npu", "--no-plots", "--out",
                                         str(out / case.name), *dims])
            if code != 0:
                return f"monet report: exit {code}: {err.strip()}"
        return None
    if case.kind == "onnx":
        tool, code, err = "monet-opt", *run_tool(monet_opt, [case.path, *dims])
    else:
        tool, code, err = "monet", *run_tool(monet, ["targets", case.path])
        if case.valid:
            return None if code == 0 else f"refused: {err.strip()}"
    lines = [line for line in err.splitlines() if line.strip()]
    if code != 1 or "Traceback" in err:
        return f"exit {code}: {err.strip()}"
    if len(lines) != 1:
        return f"{len(lines)} lines: {lines}"
    if not lines[0].startswith(f"{tool}: error: "):
        return f"not an error line: {lines[0]}"
    named = case.file or case.path
    if not lines[0].startswith(f"{tool}: error: {named}: "):
        return f"the file ({named}) is not named: {lines[0]}"
    missing = [fragment for fragment in case.expect if fragment not in lines[0]]
    return f"does not say {missing}: {lines[0]}" if missing else None


@pytest.fixture(scope="module")
def cases(tmp_path_factory) -> tuple[list[generate.Case], Path]:
    out = tmp_path_factory.mktemp("unusual")
    return generate.generate(out / "files", SEED, models=110, targets=100), out


def test_the_generator_covers_what_it_promises(cases):
    found, _ = cases
    onnx_valid = [c for c in found if c.kind == "onnx" and c.valid]
    assert len([c for c in found if c.valid]) >= 200 and len([c for c in found if not c.valid]) >= 180
    notes = " ".join(n for c in onnx_valid for n in c.notes)
    for feature in ("opset 13", "opset 21", "ts style", "dynamo style", "empty optional input", "symbolic dim",
                    "scalar input", "external data", "initializers as graph inputs", "unicode names"):
        assert feature in notes, feature
    kinds = {c.notes[0] for c in found if c.kind == "onnx" and not c.valid}
    assert len(kinds) >= 25, kinds


@pytest.mark.parametrize("kind, valid", [("onnx", True), ("onnx", False), ("target", True), ("target", False)])
def test_every_case(cases, kind, valid):
    found, out = cases
    failures = []
    for case in found:
        if case.kind == kind and case.valid == valid:
            problem = outcome(case, out)
            if problem:
                failures.append(f"{case.name} ({', '.join(case.notes)}): {problem}")
    assert not failures, "\n".join(failures[:20]) + f"\n({len(failures)} failures)"
