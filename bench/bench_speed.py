"""Benchmark: start-up and whole-process figures of issue 15's targets, each in fresh processes.

    python bench/bench_speed.py [--models DIR] [--repeat 5] [--python PYTHON] [--vs OTHER_CHECKOUT]

Prints, as medians over --repeat runs (min in brackets):

- start-up: CPU and wall of `monet targets` and of `monet-opt` on an empty module (imports of
  our packages and xDSL; target ≤ 0.25 s);
- `monet report examples/models/resnet18_b1.onnx --target tpu_like_quad_core` with plots: wall
  time until the text summary is on stdout (target ≤ 1 s) and until the process ends (plots
  written), and the CPU of the whole process tree, with the persistent cost cache warm and turned
  off; the SVG plots (default) are written in the main process, `--plot-format png` draws PNGs
  with matplotlib in a second process (its CPU counts in the tree);
- MONET's ORT ResNet-18 training graph (../shared/models/monet/resnet18_full_training.onnx) on
  Stream's tpu_like_quad_core, int8: CPU of the whole process tree with and without plots
  (target ≤ 1 s), cost cache warm.

`--vs DIR` runs another checkout (an older commit unpacked with `git archive`, imported through
PYTHONPATH from a neutral directory) in turn with this one and prints the CPU ratio; this checkout
runs from a neutral directory too, through the installed (editable) package.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, float]:
    """(wall to the first stdout line, wall to the end, CPU of the process tree)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    assert proc.stdout is not None
    proc.stdout.readline()
    first = time.perf_counter() - t0
    proc.stdout.read()
    proc.wait()
    end = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(cmd)}")
    return first, end, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def figures(cmd: list[str], envs: list[dict[str, str]], cwd: str, repeat: int) -> list[list[tuple[float, float, float]]]:
    """Runs of `cmd` under each environment, taken in turn (A B A B ...) so that a drift of the
    machine's speed affects them alike; one warm-up run each (file caches, the cost cache)."""
    for env in envs:
        run(cmd, env, cwd)
    results: list[list[tuple[float, float, float]]] = [[] for _ in envs]
    for _ in range(repeat):
        for i, env in enumerate(envs):
            results[i].append(run(cmd, env, cwd))
    return results


def fmt(values: list[float]) -> str:
    return f"{statistics.median(values):6.2f} s ({min(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=Path,
                        default=Path(os.environ.get("MONET_SHARED", REPO.parent / "shared")) / "models")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--vs", default="", metavar="DIR",
                        help="another checkout (e.g. `git archive COMMIT | tar -x -C DIR`) run in turn with this one")
    args = parser.parse_args()
    py = args.python
    with tempfile.TemporaryDirectory() as tmp:
        base = dict(os.environ)
        base.pop("PYTHONPATH", None)
        # as a user runs: the warm-up run writes the bytecode caches (with PYTHONDONTWRITEBYTECODE
        # set, every changed or new module, and a whole --vs checkout, were compiled on every run)
        base.pop("PYTHONDONTWRITEBYTECODE", None)
        sides = [("this checkout", base)]
        if args.vs:
            sides.append((f"vs {args.vs}", {**base, "PYTHONPATH": str(Path(args.vs).resolve())}))
        for i, (_, env) in enumerate(sides):
            env["MONET_COST_CACHE"] = str(Path(tmp) / f"costs{i}.sqlite")
        empty = Path(tmp) / "empty.mlir"
        empty.write_text("builtin.module {}\n")
        resnet = str(REPO / "examples" / "models" / "resnet18_b1.onnx")
        monet = [py, "-m", "monet_ir.tools.monet"]
        report = monet + ["report", resnet, "--target", "tpu_like_quad_core", "--out", str(Path(tmp) / "r")]
        ort = args.models / "monet" / "resnet18_full_training.onnx"
        stream = args.models.parent / "stream_hw" / "tpu_like_quad_core.yaml"
        cases = [("start-up: monet targets", monet + ["targets"], False, {}),
                 ("start-up: monet-opt empty.mlir", [py, "-m", "monet_ir.tools.monet_opt", str(empty)], False, {}),
                 ("ResNet-18 b1 report + plots, cost cache warm", report, True, {}),
                 ("ResNet-18 b1 report + plots, no cost cache", report, True, {"MONET_COST_CACHE": "off"}),
                 ("ResNet-18 b1 report + PNG plots (matplotlib), warm", report + ["--plot-format", "png"], True, {})]
        if ort.exists() and stream.exists():
            ort_cmd = monet + ["report", str(ort), "--target", str(stream), "--out", str(Path(tmp) / "o")]
            cases += [("ORT ResNet-18 graph, Stream tpu_like_quad_core + plots", ort_cmd, True, {}),
                      ("ORT ResNet-18 graph, Stream tpu_like --no-plots", ort_cmd + ["--no-plots"], True, {})]
        else:
            print(f"ORT ResNet-18 graph: {ort} or {stream} missing, skipped")
        print(f"medians of {args.repeat} runs (min); {len(sides)} side(s) taken in turn")
        print(f"{'run':<56}{'side':<24}{'to summary':>16}{'to exit':>16}{'CPU':>16}")
        for name, cmd, summary, extra in cases:
            # --plot-format is newer than the checkouts --vs compares with: this side only
            runs_on = sides[:1] if "--plot-format" in cmd else sides
            results = figures(cmd, [{**env, **extra} for _, env in runs_on], tmp, args.repeat)
            for (side, _), rows in zip(runs_on, results, strict=True):
                first = fmt([r[0] for r in rows]) if summary else ""
                print(f"{name:<56}{side[:23]:<24}{first:>16}{fmt([r[1] for r in rows]):>16}"
                      f"{fmt([r[2] for r in rows]):>16}", flush=True)
            if len(results) == 2:
                cpu = statistics.median(r[2] for r in results[0]) / statistics.median(r[2] for r in results[1])
                print(f"{'':<56}{'ratio (this / vs), CPU':<24}{'':>16}{'':>16}{cpu:>16.2f}")

if __name__ == "__main__":
    main()
