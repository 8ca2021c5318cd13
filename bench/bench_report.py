"""Benchmark: `monet report` end to end (import, autodiff, Adam, costing, scheduling, report with
plots), wall time and peak RSS per run, each in a fresh process.

    python bench/bench_report.py [--models DIR]

Targets on a 2-core machine: ResNet-18 b1 (224x224) with Adam on tpu_like_quad_core in <= 3 s;
GPT-2 124M b1 in <= 30 s with <= 2 GB peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from shared_path import SHARED

RUNS = [("resnet18_b1", "tpu_like_quad_core", 3.0), ("gpt2_small_b8", "hetero_chip", None),
        ("gpt2_124m_b1", "datacenter", 30.0)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path, default=SHARED / "models")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'model':<16}{'target':<20}{'wall s (best)':>14}{'target s':>10}{'ratio':>8}{'peak RSS MB':>13}")
    for model, target, budget in RUNS:
        path = args.models / f"{model}.onnx"
        if not path.exists():
            print(f"{model:<16} missing")
            continue
        walls, rss = [], 0.0
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory() as out:
                before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", "report", str(path), "--target", target,
                                "--out", out], check=True, capture_output=True)
                walls.append(time.perf_counter() - t0)
                rss = max(rss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, before / 1024)
        best = min(walls)
        ratio = f"{best / budget:.2f}" if budget else "-"
        print(f"{model:<16}{target:<20}{best:>14.2f}{budget or '-':>10}{ratio:>8}{rss:>13.0f}")


if __name__ == "__main__":
    main()
