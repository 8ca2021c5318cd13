"""Benchmark: MX training steps (the table of docs/mx.md).

For each workload and target: peak DRAM occupancy, latency and energy of one Adam training step
in fp32, bf16, MXFP8 with vector groups, MXFP8 with square 8x8 groups and MXFP4 with square
groups (and MXINT8 with vector groups, the Dacapo-like baseline of the seed paper), and the
requantize ops the vector groups need. MX policies keep fp32 master weights
and optimizer state (`master=fp32,state=fp32`): weights and activations in the named format,
gradients in MXFP8 E5M2 for MXFP8 and in the named format for MXFP4.

    python bench/bench_mx_training.py [--models DIR]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
CASES = [("resnet18_b1", "snax_mx"), ("resnet18_b1", "edge_npu"),
         ("gpt2_124m_b1", "snax_mx"), ("gpt2_124m_b1", "edge_npu")]
MX8 = "weights=mxfp8_e4m3,activations=mxfp8_e4m3,gradients=mxfp8_e5m2,master=fp32,state=fp32"
MXI8 = "weights=mxint8,activations=mxint8,gradients=mxint8,master=fp32,state=fp32"
MX4 = "weights=mxfp4_e2m1,activations=mxfp4_e2m1,gradients=mxfp4_e2m1,master=fp32,state=fp32"
CONFIGS = [("fp32", "fp32", "vector"), ("bf16", "bf16", "vector"), ("MXINT8 vector", MXI8, "vector"),
           ("MXFP8 vector", MX8, "vector"),
           ("MXFP8 square", MX8, "square:8x8"), ("MXFP4 square", MX4, "square:8x8")]


def measure(model: Path, target: str, precision: str, group: str, out: str) -> dict | None:
    from monet_ir.tools.monet import Progress, build_parser, make_report
    from targets import TargetError

    args = build_parser().parse_args(["report", str(model), "--target", target, "--out", out,
                                      "--precision", precision, "--mx-group", group])
    try:
        report = make_report(args, Progress(enabled=False))[0]
    except TargetError as e:
        message = str(e)
        return {"error": message[message.find("core "):message.find(";")] if "cannot run" in message else message}
    dram = [k for k in report["memory"]["peak_bytes"] if not k.startswith("core")][0]
    rows = [r for r in report["layers"] if r["op"] == "mx.requantize"]
    return {"peak": report["memory"]["peak_bytes"][dram], "latency": report["latency_s"],
            "energy": report["energy_pj"] / 1e9, "requantize": len(rows),
            "requantize_energy": sum(r["energy_pj"] for r in rows) / 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=str(REPO.parent / "shared" / "models"))
    models = Path(parser.parse_args().models)
    print("| model | target | step | DRAM peak (MB) | latency (ms) | energy (mJ) | requantize ops (mJ) |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for model, target in CASES:
            path = models / f"{model}.onnx"
            if not path.exists():
                print(f"| {model} | {target} | (no {path}) | | | | |")
                continue
            for label, precision, group in CONFIGS:
                m = measure(path, target, precision, group, tmp)
                if "error" in m:
                    print(f"| {model} | {target} | {label} | n/a: {m['error']} | | | |")
                    continue
                print(f"| {model} | {target} | {label} | {m['peak'] / 1e6:.2f} | {m['latency'] * 1e3:.2f} | "
                      f"{m['energy']:.3f} | {m['requantize']} ({m['requantize_energy']:.3f}) |", flush=True)


if __name__ == "__main__":
    main()
