"""Benchmark: ONNX import through the Python API (build IR, verify) — time, op count, peak RSS.

    python bench/bench_import.py [--models DIR]

Targets on a 2-core machine: ResNet-18 b32 under 1 s, GPT-2 124M under 5 s. Each model runs in
its own process so that peak RSS is per model.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from shared_path import SHARED

WORKLOADS = [("resnet18_b32.onnx", 1.0), ("gpt2_small_b8.onnx", None), ("gpt2_124m_b1.onnx", 5.0)]

CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from monet_ir import import_onnx
t1 = time.perf_counter()
module = import_onnx(sys.argv[1])
t2 = time.perf_counter()
ops = sum(1 for _ in module.walk()) - 2
print(json.dumps({"startup_s": t1 - t0, "import_s": t2 - t1, "ops": ops,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=SHARED / "models")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'model':<24}{'import s (best)':>16}{'target s':>10}{'ratio':>8}{'ops':>8}{'peak RSS MB':>13}")
    for name, target in WORKLOADS:
        path = args.models / name
        if not path.exists():
            print(f"{name:<24}  missing ({path})")
            continue
        runs = [json.loads(subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True,
                                          text=True, check=True).stdout) for _ in range(args.repeat)]
        best = min(r["import_s"] for r in runs)
        rss = max(r["peak_rss_mb"] for r in runs)
        ratio = f"{best / target:.2f}" if target else "-"
        print(f"{name:<24}{best:>16.3f}{target or '-':>10}{ratio:>8}{runs[0]['ops']:>8}{rss:>13.0f}")


if __name__ == "__main__":
    main()
