"""Benchmark: autodiff + insert-optimizer (and import) on the shared workloads, through the
Python API. Target: GPT-2 124M in under 10 s on a 2-core machine.

    python bench/bench_training_passes.py [--models DIR]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from shared_path import SHARED

WORKLOADS = ["resnet18_b32", "gpt2_small_b8", "gpt2_124m_b1"]


def main() -> None:
    from xdsl.context import Context

    from monet_ir import import_onnx
    from passes.autodiff import AutodiffPass
    from passes.insert_optimizer import InsertOptimizerPass

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=SHARED / "models")
    args = parser.parse_args()
    print(f"{'model':<16}{'import s':>10}{'autodiff s':>12}{'optimizer s':>13}{'verify s':>10}{'ops after':>11}")
    for name in WORKLOADS:
        path = args.models / f"{name}.onnx"
        if not path.exists():
            print(f"{name:<16} missing")
            continue
        t0 = time.perf_counter()
        module = import_onnx(path)
        t1 = time.perf_counter()
        AutodiffPass().apply(Context(), module)
        t2 = time.perf_counter()
        InsertOptimizerPass(kind="adam").apply(Context(), module)
        t3 = time.perf_counter()
        module.verify()
        t4 = time.perf_counter()
        ops = sum(1 for _ in module.walk()) - 2
        print(f"{name:<16}{t1 - t0:>10.2f}{t2 - t1:>12.2f}{t3 - t2:>13.2f}{t4 - t3:>10.2f}{ops:>11}")
    print("target: autodiff + optimizer on gpt2_124m_b1 under 10 s")


if __name__ == "__main__":
    main()
