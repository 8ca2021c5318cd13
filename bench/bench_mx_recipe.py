"""Which part of the training recipe moves the MX memory footprint and training throughput
(against the seed paper's 51 % and 4x, Cuyckens et al. 2025, arXiv 2505.22404): one Adam step
per workload on a Dacapo-like target (`dacapo_target`: snax_mx's system with an MXINT8-only
array of 4x the PEs, iso-peak-throughput with snax_mx's MXFP8 mode) under MXINT8 with vector
groups, and on `snax_mx` (the lab's precision-scalable 8 x 8 MX array at 500 MHz) under MXFP8 /
MXFP4 with square 8x8 groups, each with the master weights and the optimizer state kept in fp32
(MONET's default recipe) or stored in the MX format too, and the ratios of each to the
Dacapo-like fp32-master step. Rows that change one thing at a time are the experiments.

    python bench/bench_mx_recipe.py [--models DIR] [--workloads resnet18_b1,gpt2_small_b1]

Footprint = the DRAM peak of the scheduled step (every tensor: parameters, master copies,
optimizer state, activations, gradients, requantized copies). Effective training throughput =
1 / step latency.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from shared_path import SHARED  # noqa: E402


def policy(fmt: str, grads: str, keep: str) -> str:
    master = "fp32" if keep == "fp32" else fmt
    return f"weights={fmt},activations={fmt},gradients={grads},master={master},state={master}"


CONFIGS = [  # label, target ("dacapo": the iso-peak MXINT-only array), format, gradient format, group, master/state
    ("Dacapo-like: MXINT8 vector, fp32 master+state", "dacapo", "mxint8", "mxint8", "vector", "fp32"),
    ("Dacapo-like: MXINT8 vector, MX master+state", "dacapo", "mxint8", "mxint8", "vector", "mx"),
    ("Dacapo-like array, MXINT8 square, fp32 master+state", "dacapo", "mxint8", "mxint8", "square:8x8", "fp32"),
    ("snax_mx: MXINT8 vector, fp32 master+state", "snax", "mxint8", "mxint8", "vector", "fp32"),
    ("snax_mx: MXFP8 square, fp32 master+state", "snax", "mxfp8_e4m3", "mxfp8_e5m2", "square:8x8", "fp32"),
    ("snax_mx: MXFP8 square, MX master+state", "snax", "mxfp8_e4m3", "mxfp8_e5m2", "square:8x8", "mx"),
    ("snax_mx: MXFP4 square, fp32 master+state", "snax", "mxfp4_e2m1", "mxfp4_e2m1", "square:8x8", "fp32"),
    ("snax_mx: MXFP4 square, MX master+state", "snax", "mxfp4_e2m1", "mxfp4_e2m1", "square:8x8", "mx"),
]


def dacapo_target(folder: Path) -> Path:
    """`snax_mx` with an MXINT-only array of 16 x 16 PEs (4x the 8 x 8 array's PEs: the MXINT8
    peak equals snax_mx's MXFP8 peak, 256 GOPS at 500 MHz: iso-peak-throughput) and twice the
    TCDM port width (the array's rows and columns each take twice the operands)."""
    import yaml

    data = yaml.safe_load((REPO / "targets" / "builtin" / "snax_mx.yaml").read_text())
    data["name"] = "dacapo_like"
    data["description"] = "Dacapo-like: 16x16 MXINT8-only array (iso-peak with snax_mx's MXFP8), Snitch, LPDDR4X"
    data["default_precision"] = "mxint8"
    array = data["cores"][0]
    array["name"] = "mxint_array"
    array["array"]["dims"] = {"D1": 16, "D2": 16}
    array["array"]["dataflow"] = {"D1": ["K, 16"], "D2": ["C, 16"]}
    array["precisions"] = {k: v for k, v in array["precisions"].items() if k in ("mxint8", "int8")}
    array["memories"]["tcdm_128KB"]["read_bw"] *= 2
    if "write_bw" in array["memories"]["tcdm_128KB"]:
        array["memories"]["tcdm_128KB"]["write_bw"] *= 2
    path = folder / "dacapo_like.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def measure(model: Path, target: str, precision: str, group: str, out: str) -> dict:
    from monet_ir.tools.monet import Progress, build_parser, make_report

    args = build_parser().parse_args(["report", str(model), "--target", target, "--out", out, "--precision", precision,
                                      "--mx-group", group])
    report = make_report(args, Progress(enabled=False))[0]
    dram = [k for k in report["memory"]["peak_bytes"] if not k.startswith("core")][0]
    return {"peak": report["memory"]["peak_bytes"][dram], "latency": report["latency_s"],
            "energy": report["energy_pj"] / 1e9}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=str(SHARED / "models"))
    parser.add_argument("--workloads", default="resnet18_b1,gpt2_small_b1")
    parser.add_argument("--target", default="snax_mx")
    args = parser.parse_args()
    print("| workload | step | DRAM peak (MB) | footprint vs Dacapo-like | latency (ms) | throughput vs Dacapo-like | "
          "energy (mJ) | energy vs Dacapo-like |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        targets = {"snax": args.target, "dacapo": str(dacapo_target(Path(tmp)))}
        for name in args.workloads.split(","):
            path = Path(args.models) / f"{name}.onnx"
            base = None
            for label, target, fmt, grads, group, keep in CONFIGS:
                m = measure(path, targets[target], policy(fmt, grads, keep), group, tmp)
                base = base or m
                print(f"| {name} | {label} | {m['peak'] / 1e6:.2f} | {m['peak'] / base['peak'] - 1:+.1%} | "
                      f"{m['latency'] * 1e3:.2f} | {base['latency'] / m['latency']:.2f}x | {m['energy']:.3f} | "
                      f"{m['energy'] / base['energy']:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
