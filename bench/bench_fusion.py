"""Benchmark: what layer fusion saves on the training step (the table of docs/checkpointing-fusion.md).

For each workload and target: DRAM traffic, latency and energy unfused, with forward stacks
only (`fuse-layers{mode=auto backward=false}`) and with forward + backward stacks (the
default), Adam, the target's default precision.

    python bench/bench_fusion.py [--models DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from shared_path import SHARED

REPO = Path(__file__).resolve().parents[1]
CASES = [
    ("resnet18_b1", "edge_npu"), ("resnet18_b1", "hetero_chip"), ("resnet18_b1", "tpu_like_quad_core"),
    ("gpt2_small_b8", "tpu_like_quad_core"), ("gpt2_small_b8", "datacenter"),
]


def measure(model: Path, target_name: str, fusion: str) -> tuple[float, float, float]:
    from xdsl.context import Context

    from monet_ir import import_onnx
    from monet_ir.emit.step_report import schedule_report
    from monet_ir.graph import step_function
    from monet_ir.schedule.scheduler import schedule
    from monet_ir.schedule.taskgraph import extract
    from passes.autodiff import AutodiffPass
    from passes.fuse_layers import FuseLayersPass
    from passes.insert_optimizer import InsertOptimizerPass
    from targets import get_target
    from targets.precision_choice import choose_precision

    module = import_onnx(model)
    AutodiffPass().apply(Context(), module)
    InsertOptimizerPass(kind="adam").apply(Context(), module)
    if fusion != "none":
        FuseLayersPass(mode="auto", target=target_name, backward=fusion == "both").apply(Context(), module)
    target = get_target(target_name)
    bits = choose_precision(target, None).bits
    report = schedule_report(schedule(extract(step_function(module), bits=bits), target), layers=False)
    return report["dram_traffic_bytes"] / 1e6, report["latency_cycles"] / 1e6, report["energy_pj"] / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=SHARED / "models")
    args = parser.parse_args()
    print("| workload, target | DRAM traffic (MB): unfused → forward stacks → forward + backward stacks "
          "| latency (Mcycles) | energy (mJ) |")
    print("|---|---|---|---|")
    for name, target in CASES:
        model = REPO / "examples" / "models" / f"{name}.onnx"
        model = model if model.exists() else args.models / f"{name}.onnx"
        if not model.exists():
            print(f"| {name}, {target} | missing | | |")
            continue
        rows = [measure(model, target, fusion) for fusion in ("none", "forward", "both")]
        cols = [" → ".join(f"{r[i]:,.2f}" for r in rows) for i in range(3)]
        print(f"| {name.replace('_', ' ')}, {target} | {cols[0]} | {cols[1]} | {cols[2]} |", flush=True)


if __name__ == "__main__":
    main()
