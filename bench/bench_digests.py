"""Benchmark guard: reports and fronts of larger workloads stay byte-identical.

    python bench/bench_digests.py [--models DIR] [--record] [--only SUBSTRING]

Runs `monet report` (no plots) on the shared workloads (ResNet-18 b1/b32, GPT-2 small b8,
GPT-2 124M b1, MONET's ORT ResNet-18 training graph on Stream's tpu_like_quad_core, with and
without fusion and checkpointing) and a small `monet explore` with every gene on GPT-2 small b8,
each in a fresh process, and compares the SHA-256 of report.json, layers.csv, report.txt and
trace.json (front.json and evaluated.csv for explore) with bench/digests.json, which `--record`
writes from the code at hand. Prints one line per case: same / CHANGED / recorded, and its wall time.
tests/unit/test_report_digests.py does the same in-process on small models.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DIGESTS = Path(__file__).resolve().parent / "digests.json"
REPORT_FILES = ("report.json", "layers.csv", "report.txt", "trace.json")
EXPLORE_FILES = ("front.json", "evaluated.csv")

# (id, command, model (relative to --models), target, options)
CASES = [
    ("resnet18_b1-tpu", "report", "resnet18_b1.onnx", "tpu_like_quad_core", []),
    ("resnet18_b1-edge-fusion-sqrt", "report", "resnet18_b1.onnx", "edge_npu", ["--fusion", "auto", "--checkpoint", "sqrt"]),
    ("resnet18_b32-hetero", "report", "resnet18_b32.onnx", "hetero_chip", []),
    ("resnet18_b32-datacenter-recompute", "report", "resnet18_b32.onnx", "datacenter", ["--checkpoint", "recompute-all"]),
    ("gpt2_small_b8-hetero", "report", "gpt2_small_b8.onnx", "hetero_chip", []),
    ("gpt2_small_b8-tpu-fusion", "report", "gpt2_small_b8.onnx", "tpu_like_quad_core", ["--fusion", "auto"]),
    ("gpt2_124m_b1-datacenter", "report", "gpt2_124m_b1.onnx", "datacenter", []),
    ("ort-resnet18-stream-tpu", "report", "monet/resnet18_full_training.onnx", "STREAM:tpu_like_quad_core.yaml", []),
    ("ort-gpt2like-edge", "report", "monet/gpt2like_training.onnx", "edge_npu", []),
    ("explore-gpt2_small_b8-all", "explore", "gpt2_small_b8.onnx", "tpu_like_quad_core",
     ["--population", "8", "--generations", "2", "--jobs", "1", "--seed", "3"]),
    ("explore-resnet18_b1-layers", "explore", "resnet18_b1.onnx", "hetero_chip",
     ["--population", "8", "--generations", "2", "--jobs", "1", "--search", "checkpoint,allocation"]),
]


def run_case(case: tuple, models: Path, out: Path) -> dict[str, str]:
    name, command, model, target, options = case
    if target.startswith("STREAM:"):
        target = str(models.parent / "stream_hw" / target.removeprefix("STREAM:"))
    subprocess.run([sys.executable, "-m", "monet_ir.tools.monet", command, str(models / model), "--target", target,
                    "--out", str(out), "--no-plots", *options], check=True, capture_output=True, cwd=REPO)
    files = REPORT_FILES if command == "report" else EXPLORE_FILES
    return {f: hashlib.sha256((out / f).read_bytes()).hexdigest() for f in files}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path,
                        default=Path(os.environ.get("MONET_SHARED", REPO.parent / "shared")) / "models")
    parser.add_argument("--record", action="store_true", help="write bench/digests.json from this code")
    parser.add_argument("--only", default="", help="run the cases whose id contains this")
    args = parser.parse_args()
    recorded = json.loads(DIGESTS.read_text()) if DIGESTS.exists() else {}
    changed = 0
    for case in CASES:
        if args.only not in case[0]:
            continue
        if not (args.models / case[2]).exists():
            print(f"{case[0]:<40} missing {case[2]}")
            continue
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            got = run_case(case, args.models, Path(out))
            wall = time.perf_counter() - t0
        if args.record:
            recorded[case[0]] = got
            verdict = "recorded"
        elif case[0] not in recorded:
            verdict = "no digest recorded"
        else:
            diff = [f for f in got if got[f] != recorded[case[0]].get(f)]
            verdict = "same" if not diff else "CHANGED: " + ", ".join(diff)
            changed += bool(diff)
        print(f"{case[0]:<40}{wall:>7.1f} s  {verdict}", flush=True)
    if args.record:
        DIGESTS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    sys.exit(1 if changed else 0)


if __name__ == "__main__":
    main()
