"""Benchmark (not a test): wall time of costing a whole training step on every core.

For ResNet-18 (batch 32) and GPT-2 124M (batch 1, 1024 tokens) from ../shared/models, build the
training-step signature set (forward, input-gradient and weight-gradient loop nests per
Conv/Gemm/MatMul, forward and gradient vector ops, one Adam update per parameter; bf16 with
fp32 partial sums), then cost every signature on every core that can run it, on 6-core targets.
Reports the distinct signatures, the (signature, core) pairs priced, and the wall and CPU time
from a cold memo cache (cores with identical hardware share their cache entries; CPU time is the
figure to read on a shared machine).

Usage: python bench/bench_cost_speed.py [--targets hetero_chip tpu_like_quad_core]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from shared_path import SHARED

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
MODELS = str(SHARED / "models")
sys.path.insert(0, REPO)

WORKLOADS = {"resnet18_b32": "resnet18_b32.onnx", "gpt2_124m_b1": "gpt2_124m_b1.onnx"}


def run(workload: str, target_name: str) -> None:
    from monet_ir.cost import can_run, clear_cache, cost_of
    from monet_ir.cost.signature import LoopNestSig
    from monet_ir.cost.training_sigs import training_step_sigs
    from targets import get_target

    target = get_target(target_name)
    sigs = training_step_sigs(os.path.join(MODELS, WORKLOADS[workload]))
    distinct = {sig for _, sig in sigs}
    nests = {sig for sig in distinct if isinstance(sig, LoopNestSig)}
    clear_cache()
    start = time.perf_counter()
    cpu_start = time.process_time()
    priced = 0
    latency = {core.id: 0.0 for core in target.cores}
    for _, sig in sigs:
        for core in target.cores:
            if can_run(sig, core):
                latency[core.id] += cost_of(sig, core).latency_cycles
                priced += 1
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    print(
        f"{workload:14s} on {target_name:18s} ({len(target.cores)} cores): {len(sigs)} ops, {len(distinct)} distinct "
        f"signatures ({len(nests)} loop nests), {priced} (op, core) prices in {wall:.2f} s wall, {cpu:.2f} s CPU"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", nargs="+", default=["hetero_chip", "tpu_like_quad_core"])
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    args = parser.parse_args()
    for workload in args.workloads:
        if not os.path.exists(os.path.join(MODELS, WORKLOADS[workload])):
            print(f"skipped {workload}: ../shared/models not found")
            continue
        for target_name in args.targets:
            run(workload, target_name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
