"""Benchmark: the `snax_mx` target against the SNAX MX array paper's figures.

Peak GOPS come from the target description (PEs x MACs per PE per cycle x 2 ops x clock);
achieved GOPS and GOPS/W from `monet report --inference` of one large matmul (M = K = N =
512 by default, held on chip: a compute-bound case), per MX format, next to the paper's
64 / 256 / 512 GOPS and 657 / 1438-1675 / 4065 GOPS/W (arXiv 2511.06313). "matmul" columns
are the `nn.matmul` op alone (the array with its registers, TCDM and L2); "step" adds the MX
casts on the Snitch cluster and the DRAM traffic of the step.

    python bench/bench_mx.py [--size 512]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

# format, the paper's GOPS and GOPS/W (MXFP8-MXFP6 share one range: low end for MXFP8)
PAPER = [("mxint8", 64, 657), ("mxfp8_e4m3", 256, 1438), ("mxfp6_e2m3", 256, 1675), ("mxfp4_e2m1", 512, 4065)]


def matmul_model(path: Path, n: int) -> Path:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    w = numpy_helper.from_array(np.zeros((n, n), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [n, n])], [w])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def peak_gops(fmt: str) -> float:
    from targets import get_target

    core = get_target("snax_mx").cores[0]
    precision = core.precision_for(0, fmt)
    return core.array.units * precision.ops_per_cycle * 2 * core.clock_hz / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512, help="M = K = N of the matmul")
    n = parser.parse_args().size
    from monet_ir.tools.monet import Progress, build_parser, make_report

    ops = 2 * n ** 3
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        model = matmul_model(Path(tmp) / "mm.onnx", n)
        for fmt, paper_gops, paper_eff in PAPER:
            args = build_parser().parse_args(["report", str(model), "--target", "snax_mx", "--inference",
                                              "--out", tmp, "--precision", fmt])
            report = make_report(args, Progress(enabled=False))[0]
            mm = next(row for row in report["layers"] if row["op"] == "nn.matmul")
            seconds = mm["latency_cycles"] / report["frequency_hz"]
            rows.append((fmt, peak_gops(fmt), paper_gops, ops / seconds / 1e9, ops / (mm["energy_pj"] * 1e-12) / 1e9,
                         ops / (report["energy_pj"] * 1e-12) / 1e9, paper_eff))
    base = rows[0][1]
    print(f"snax_mx, {n}x{n}x{n} matmul ({ops / 1e9:.3g} GOP), --inference")
    print(f"{'format':12} {'peak GOPS':>9} {'paper':>6} {'ratio':>6} {'achieved GOPS':>13} "
          f"{'matmul GOPS/W':>13} {'step GOPS/W':>11} {'paper GOPS/W':>12} {'paper/matmul':>12}")
    for fmt, peak, paper_gops, achieved, eff, step_eff, paper_eff in rows:
        print(f"{fmt:12} {peak:9.1f} {paper_gops:6d} {peak / base:6.2f} {achieved:13.1f} {eff:13.0f} "
              f"{step_eff:11.0f} {paper_eff:12d} {paper_eff / eff:12.2f}")
    print("peak within 5 % of the paper:", all(abs(r[1] / r[2] - 1) <= 0.05 for r in rows),
          "; matmul GOPS/W within 2x of the paper:", all(0.5 <= r[6] / r[4] <= 2 for r in rows))


if __name__ == "__main__":
    main()
