"""Benchmark: does the cost of a report grow linearly with the size of the step?

    python bench/bench_scaling.py [--layers 2 4 8 16 32 48] [--target datacenter] [--batch 1]
                                  [--seq 1024] [--embd 1600] [--heads 25] [--vocab 50257]
                                  [--repeat N] [--cost-cache]

Generates GPT-2-shaped, weight-free ONNX models (GPT-2 XL's width by default: n_embd 1600, 25
heads, vocab 50257, 1024 positions, tied LM head, tanh-GELU written out as PyTorch exports it; the
initializers keep their shapes and point to external data that does not exist, so the files hold
little more than the 1 MB causal mask) with 2..48 blocks, and runs `monet report` (Adam, no plots,
cost cache off unless --cost-cache) on each in a fresh process. Prints per layer count:
parameters, ops of the training step, the report's wall and CPU time in the process (import,
autodiff, optimizer, costing, scheduling, writing; every Python module a report loads is imported
beforehand, as found by a report of the smallest step in a process of its own: loading code is
start-up, `bench_speed.py`'s figure, not the report's work; so is ONNX's operator-schema registry,
which ONNX sets up on a process's first shape inference whatever the model's size, set up and timed
beforehand and printed with the ratio below), the whole process's wall
time, peak RSS, the report's CPU time per op and the marginal CPU time per op (the time the ops
added since the previous layer count took each: it rises if anything grows faster than the
step). Per-op figures use CPU time, which other processes on a shared machine disturb far less
than wall time; with --repeat the run with the least CPU counts. Then:

- the ratio of the largest to the smallest time per op (the issue's "≤ 1.5x flat" criterion; the
  time per op also carries the fixed cost of pricing each distinct layer once, which the first
  layer counts spread over few ops, so it falls with the layer count);
- the linearity check proper: the marginal time per op of the last step (e.g. 32 -> 48 layers)
  against the first (2 -> 4 layers), against 1.5 (a cost that grows faster than the step shows as
  a rising marginal time), and the range over all steps (the short first steps add few ops, so a
  loaded machine's noise shows most there: use --repeat);
- the same over two wide spans, the first and the second half of the layer counts (e.g. 2 -> 16
  and 16 -> 48 layers), which loaded-machine noise disturbs far less;
- a least-squares line report time = fixed + slope x ops over all layer counts (the fixed cost and
  the time per added op) and its largest relative residual;
- the 48-layer (1.5 B parameter) time against the 20 s target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from make_gpt2 import build, parameter_count

REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 1.5
TARGET_XL_S = 20.0

# run in the child: load the modules first (every module a report of the smallest step loads,
# `MODULES_OF_A_REPORT`, passed in MONET_BENCH_MODULES), then time the report alone
DRIVER = r"""
import importlib, json, os, resource, sys, time
t0 = time.perf_counter()
for name in os.environ.get("MONET_BENCH_MODULES", "").split():
    try:
        importlib.import_module(name)
    except Exception:  # (a module another platform's code path would load)
        pass
import monet_ir.tools.monet as monet
loaded = time.perf_counter() - t0
# ONNX sets up its operator-schema registry (C++) on the first shape inference of a process,
# whatever the model's size: start-up like the imports, timed here on its own
import onnx.defs
c0 = time.process_time()
onnx.defs.get_schema("Relu")
registry = time.process_time() - c0
args = monet.build_parser().parse_args(sys.argv[1:])
t0, c0 = time.perf_counter(), time.process_time()
monet.run_report(args)
report, cpu = time.perf_counter() - t0, time.process_time() - c0
ops = json.load(open(args.out + "/report.json"))["ops"]
print(json.dumps({"loaded": loaded, "registry": registry, "report": report, "cpu": cpu, "ops": sum(ops.values()),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}), file=sys.stderr)
"""

# run once beforehand: the modules a whole report loads (the child above imports them first, so
# the time it measures is the report's own work, not Python loading our code and libraries)
MODULES_OF_A_REPORT = r"""
import sys
import monet_ir.tools.monet as monet
monet.run_report(monet.build_parser().parse_args(sys.argv[1:]))
print(" ".join(sorted(name for name in sys.modules if not name.startswith("__"))), file=sys.stderr)
"""


def report_modules(path: Path, target: str, out: Path, env: dict[str, str]) -> str:
    """The names of the modules a report of `path` loads (`MODULES_OF_A_REPORT`)."""
    run = subprocess.run([sys.executable, "-c", MODULES_OF_A_REPORT, "report", str(path), "--target", target,
                          "--out", str(out), "--no-plots"], capture_output=True, text=True, cwd=REPO, env=env)
    if run.returncode != 0:
        raise SystemExit(f"bench_scaling: the report of {path.name} failed: {run.stderr.strip()[-500:]}")
    return run.stderr.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, nargs="+", default=[2, 4, 8, 16, 32, 48])
    parser.add_argument("--target", default="datacenter")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=1024)
    parser.add_argument("--embd", type=int, default=1600)
    parser.add_argument("--heads", type=int, default=25)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--repeat", type=int, default=1, help="runs per layer count; the fastest counts")
    parser.add_argument("--cost-cache", action="store_true",
                        help="price through a fresh persistent cost cache, warmed by an untimed run of the "
                             "smallest model (default: no cache, every run prices its ops)")
    args = parser.parse_args()
    import onnx

    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # modules compiled once, as a user runs
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env["MONET_COST_CACHE"] = "off"
    print(f"GPT-2 shape: n_embd {args.embd}, {args.heads} heads, vocab {args.vocab}, {args.seq} positions, "
          f"batch {args.batch}; target {args.target}; cost cache {'on' if args.cost_cache else 'off'}")
    print(f"{'layers':>6}{'params':>15}{'ops':>7}{'report s':>10}{'CPU s':>7}{'process s':>11}{'peak RSS MB':>13}"
          f"{'ms/op':>8}{'marginal ms/op':>15}   (ms per op: report CPU)")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        runs = sorted(args.layers)
        if args.cost_cache:
            env["MONET_COST_CACHE"] = str(Path(tmp) / "costs.sqlite")
            runs = [-runs[0]] + runs  # the warm-up run, untimed
        for layers in runs:
            warm_up, layers = layers < 0, abs(layers)
            model = build(layers, args.embd, args.heads, args.vocab, args.seq, args.batch, gelu="written")
            params = parameter_count(model)
            path = Path(tmp) / f"gpt2_{layers}l.onnx"
            onnx.save(model, path)
            out = Path(tmp) / f"out_{layers}"
            if "MONET_BENCH_MODULES" not in env:
                env["MONET_BENCH_MODULES"] = report_modules(path, args.target, out, env)
            best = None
            for _ in range(1 if warm_up else max(1, args.repeat)):
                t0 = time.perf_counter()
                run = subprocess.run([sys.executable, "-c", DRIVER, "report", str(path), "--target", args.target,
                                      "--out", str(out), "--no-plots"], capture_output=True, text=True, cwd=REPO, env=env)
                wall = time.perf_counter() - t0
                if run.returncode != 0:
                    break
                figures = json.loads(run.stderr.strip().splitlines()[-1])
                figures["wall"] = wall
                if best is None or figures["cpu"] < best["cpu"]:
                    best = figures
            if run.returncode != 0:
                print(f"{layers:>6} failed: {run.stderr.strip().splitlines()[-1] if run.stderr.strip() else run.returncode}")
                continue
            figures, wall = best, best["wall"]
            if warm_up:
                continue
            per_op = figures["cpu"] / figures["ops"] * 1e3
            # the time each op added since the previous layer count: it grows if the cost is superlinear
            marginal = ((figures["cpu"] - rows[-1][2]["cpu"]) / (figures["ops"] - rows[-1][2]["ops"]) * 1e3
                        if rows and figures["ops"] > rows[-1][2]["ops"] else float("nan"))
            rows.append((layers, params, figures, per_op, marginal))
            print(f"{layers:>6}{params:>15,}{figures['ops']:>7}{figures['report']:>10.2f}{figures['cpu']:>7.2f}{wall:>11.2f}"
                  f"{figures['rss_mb']:>13.0f}{per_op:>8.2f}{marginal:>13.2f}", flush=True)
    if len(rows) >= 2:
        per_ops = [r[3] for r in rows]
        ratio = max(per_ops) / min(per_ops)
        registry = statistics.median(r[2]["registry"] for r in rows)
        with_registry = [(r[2]["cpu"] + r[2]["registry"]) / r[2]["ops"] * 1e3 for r in rows]
        print(f"time per op: {min(per_ops):.2f}-{max(per_ops):.2f} ms, max/min {ratio:.2f} "
              f"(target ≤ {TARGET_RATIO}: {'met' if ratio <= TARGET_RATIO else 'NOT met'}); ONNX's operator "
              f"registry, set up once per process ({registry * 1e3:.0f} ms), counted as start-up; counted in "
              f"the report instead: max/min {max(with_registry) / min(with_registry):.2f}")
    marginals = [(prev[0], row[0], row[4]) for prev, row in zip(rows, rows[1:]) if row[4] == row[4]]
    if marginals:
        (a0, a1, first), (b0, b1, last) = marginals[0], marginals[-1]
        values = [m for _, _, m in marginals]
        ratio = last / first if first > 0 else float("nan")
        print(f"marginal time per added op: {a0}->{a1} layers {first:.2f} ms, {b0}->{b1} layers {last:.2f} ms, "
              f"ratio last/first {ratio:.2f} (no faster than linear if ≤ {TARGET_RATIO}: "
              f"{'met' if ratio <= TARGET_RATIO else 'NOT met'}); all steps {min(values):.2f}-{max(values):.2f} ms")
    if len(rows) >= 3:
        # the same over two wide spans (first half and second half of the layer counts): each adds
        # hundreds to thousands of ops, so a loaded machine's noise weighs far less than on 2 -> 4
        lo, mid, hi = rows[0], rows[len(rows) // 2], rows[-1]
        first_half = (mid[2]["cpu"] - lo[2]["cpu"]) / (mid[2]["ops"] - lo[2]["ops"]) * 1e3
        second_half = (hi[2]["cpu"] - mid[2]["cpu"]) / (hi[2]["ops"] - mid[2]["ops"]) * 1e3
        print(f"marginal time per added op over wide spans: {lo[0]}->{mid[0]} layers {first_half:.2f} ms, "
              f"{mid[0]}->{hi[0]} layers {second_half:.2f} ms, ratio {second_half / first_half:.2f}")
        xs = [r[2]["ops"] for r in rows]
        ys = [r[2]["cpu"] for r in rows]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        fixed = my - slope * mx
        worst = max(abs(y - (fixed + slope * x)) / y for x, y in zip(xs, ys))
        print(f"least-squares fit: report CPU s = {fixed:.2f} s + {slope * 1e3:.3f} ms x ops "
              f"(largest residual {worst:.1%} of a run's time)")
    xl = [r for r in rows if r[0] == 48]
    if xl:
        seconds = xl[0][2]["report"]
        print(f"48 layers ({xl[0][1] / 1e9:.2f} B params): report {seconds:.1f} s "
              f"(target ≤ {TARGET_XL_S:.0f} s: {'met' if seconds <= TARGET_XL_S else 'NOT met'})")


if __name__ == "__main__":
    main()
