"""Milliseconds per `monet explore` evaluation, this checkout against another one, interleaved.

    python bench/bench_eval_speed.py [--vs OTHER_CHECKOUT] [--rounds 3] [--samples 20]
                                     [--models resnet18_b1 gpt2_small_b8] [--target tpu_like_quad_core]

For each model (ResNet-18 b1 from examples/models, GPT-2 small b8 from ../shared/models, skipped
when absent) and two kinds of candidates, each round runs a fresh process per checkout, in turn
(A B A B ...: a drift of the machine's load affects both alike), that builds the `Evaluator`,
evaluates candidates to warm the cost model (5 layer by layer, `--warmup` with every gene: fused
tiles have shapes of their own to price, which a long search has mostly priced; the persistent
cost cache is used as `monet explore` uses it), then times `--samples` evaluations of seeded
random candidates, the same list in every process:

- layer by layer: a random recompute set and core allocation (every candidate has a task graph
  not seen before: extraction, scheduling and objectives all run; issue 15's target ≤ 10 ms);
- every gene: a random recompute set, allocation, fused stacks (each stack fused with
  probability 0.5, as a random genome) and tile count (target ≤ 20 ms).

- search's candidates (`--candidates FILE.json`, written by `bench_explore.py --search 64 50
  --genes all --record FILE.json`): every `--every`-th candidate a real search evaluated, in
  its order, the first `--warmup` of them not timed; a converged search evaluates far larger graphs than random
  genomes (most stacks fused, 16 tiles), and its time follows their mean, printed too.

`--instructions` counts instead of timing: each checkout's process runs under valgrind's callgrind
(`--collect-atstart=no --toggle-collect=starmap_next`: only the evaluations after the warm-up
are counted, they run inside `itertools.starmap`, which nothing they call uses) and prints
instructions per evaluation, this checkout's against the other's: on this VM, whose CPU speed
wanders 1.3-2x from minute to minute, timings of versions a few percent apart do not separate,
instruction counts do. One round is enough (a count repeats); needs valgrind; minutes per model.

`--stage graph` times only the candidates' task graphs (`Evaluator.graph`: the checkpoint and
fusion passes' plans and the extraction), each built afresh.

Prints per model and kind the median wall ms per evaluation of each round and checkout, the
median over rounds, and the ratio other / this; then the same for CPU ms (process time: less
sensitive than wall time to other processes on a shared machine). `--vs DIR` is an older commit unpacked with
`git archive COMMIT | tar -x -C DIR`; both run with the garbage-collection settings of a search
(`tuned_collection`) and `OPENBLAS_NUM_THREADS=1`. The load average is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MONET_SHARED", REPO.parent / "shared"))
MODELS = {
    "resnet18_b1": REPO / "examples" / "models" / "resnet18_b1.onnx",
    "gpt2_small_b8": SHARED / "models" / "gpt2_small_b8.onnx",
}
TARGETS_MS = {"layer by layer": 10.0, "every gene": 20.0, "search's candidates": 20.0}

CHILD = r"""
import itertools, json, random, statistics, sys, time
from monet_ir.explore.evaluate import Evaluator, StepConfig, tuned_collection

model, target, samples, warmup, bench = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
stage, candidates_file, every = sys.argv[6], sys.argv[7], int(sys.argv[8])
only = sys.argv[9] if len(sys.argv) > 9 else ""  # one kind of candidates (--instructions counts each alone)
path = list(sys.path)
sys.path.insert(0, bench)  # this checkout's bench/: the candidate generator is the same for both checkouts
from bench_explore import random_candidate
sys.path[:] = path  # (bench_explore puts its checkout first: the passes, targets, ... imported later come from ours)

def candidate(ev, rng, fusion):
    return random_candidate(ev, rng, fusion=fusion, fuse=0.5)

def recorded(path, every, warmup):
    # (warm-up, timed) candidates of a recorded search: every `every`-th, in the search's order,
    # the first `warmup` of them not timed (a worker's caches fill as its search goes on)
    from monet_ir.explore.evaluate import Candidate
    rows = json.loads(open(path).read())
    def of(row):
        return Candidate(tuple(row["recompute"]), tuple((n, tuple(c)) for n, c in row["allocation"]),
                         tuple(row["fusion"]), row["tiles"], row["precision"], tuple(row["paged"]), tuple(row["stored"]))
    sample = [of(r) for r in rows[::every]]
    return sample[:warmup], sample[warmup:]

def timed(ev, cands):
    times, cpu, tasks = [], [], []
    def one(c):
        if stage == "graph":
            ev._graphs.clear()  # (the graphs it frees are not timed)
        t0, c0 = time.perf_counter(), time.process_time()
        ev.graph(c) if stage == "graph" else ev.evaluate(c)
        cpu.append((time.process_time() - c0) * 1e3)
        times.append((time.perf_counter() - t0) * 1e3)
        tasks.append(len(ev.graph(c).tasks))
    list(itertools.starmap(one, [(c,) for c in cands]))  # (what --instructions counts)
    return {"ms": statistics.median(times), "cpu": statistics.median(cpu), "tasks": statistics.median(tasks),
            "cpu_mean": statistics.mean(cpu), "count": len(cands)}

out = {}
with tuned_collection():
    ev = Evaluator(StepConfig(model, target))
    if candidates_file:
        warm, cands = recorded(candidates_file, every, warmup)
        for c in warm:
            ev.evaluate(c)
        out["search's candidates"] = timed(ev, cands)
        print(json.dumps(out))
        sys.exit(0)
    for kind, fusion in (("layer by layer", False), ("every gene", True)):
        if (fusion and not ev.fusion_genes) or (only and kind != only):
            continue
        rng = random.Random(1)
        for _ in range(warmup if fusion else 5):  # warm-up: the cost model prices the ops (and fused tiles)
            ev.evaluate(candidate(ev, rng, fusion))
        out[kind] = timed(ev, [candidate(ev, rng, fusion) for _ in range(samples)])
print(json.dumps(out))
"""


def run_child(checkout: Path, model: Path, target: str, samples: int, warmup: int, stage: str = "evaluation",
              candidates: Path | None = None, every: int = 1, instructions: bool = False, only: str = "") -> dict:
    env = dict(os.environ, PYTHONPATH=str(checkout), OPENBLAS_NUM_THREADS="1")
    command = [sys.executable, "-c", CHILD, str(model), target, str(samples), str(warmup),
               str(Path(__file__).resolve().parent), stage, str(candidates or ""), str(every), only]
    if instructions:
        env["PYTHONHASHSEED"] = "0"
        command = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=starmap_next",
                   "--callgrind-out-file=/dev/null"] + command
    proc = subprocess.run(command, env=env, cwd=str(checkout), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{checkout}: failed:\n{proc.stderr[-2000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if instructions:
        # one count for the whole child: every kind's timed evaluations (the warm-ups are not counted)
        collected = [line for line in proc.stderr.splitlines() if "Collected :" in line]
        if not collected:
            raise SystemExit(f"{checkout}: valgrind printed no count:\n{proc.stderr[-2000:]}")
        out["instructions"] = int(collected[-1].split("Collected :")[1].replace(",", ""))
    return out


def instruction_counts(args: argparse.Namespace) -> None:
    import shutil

    if shutil.which("valgrind") is None:
        raise SystemExit("bench_eval_speed --instructions: valgrind not found (apt-get install valgrind)")
    checkouts = [("this", REPO)] + ([("other", args.vs.resolve())] if args.vs else [])
    kinds = ["search's candidates"] if args.candidates else ["layer by layer", "every gene"]
    for name in args.models[:1] if args.candidates else args.models:
        path = MODELS[name]
        if not path.is_file():
            print(f"{name}: {path} not found, skipped")
            continue
        for kind in kinds:
            counts, tasks = {}, 0
            for label, checkout in checkouts:
                out = run_child(checkout, path, args.target, args.samples, args.warmup, args.stage, args.candidates,
                                args.every, instructions=True, only="" if args.candidates else kind)
                if kind not in out:
                    break  # (a model without fusion genes has no "every gene" kind)
                counts[label] = out["instructions"] / out[kind]["count"]
                tasks = out[kind]["tasks"]
            if "this" not in counts:
                continue
            what = "per task graph" if args.stage == "graph" else "per evaluation"
            line = f"{name} {kind} ({tasks:.0f} tasks, median): this {counts['this'] / 1e6:.1f} M instructions {what}"
            if "other" in counts:
                line += f", other {counts['other'] / 1e6:.1f} M, ratio {counts['other'] / counts['this']:.3f}x"
            print(line, flush=True)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vs", type=Path, default=None, metavar="DIR")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=40,
                        help="evaluations with every gene before timing (the cost model prices new tile shapes: a long "
                             "search has priced most of them)")
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--target", default="tpu_like_quad_core")
    parser.add_argument("--stage", choices=("evaluation", "graph"), default="evaluation",
                        help="graph: time only the candidate's task graph (`Evaluator.graph`: the passes' plans and the "
                             "extraction), not its schedule")
    parser.add_argument("--candidates", type=Path, default=None, metavar="FILE.json",
                        help="time the candidates a real search evaluated (bench_explore.py --record) instead of "
                             "random ones, on the first of --models")
    parser.add_argument("--every", type=int, default=10,
                        help="with --candidates: evaluate every N-th recorded candidate in order, timing all but the "
                             "first --warmup")
    parser.add_argument("--instructions", action="store_true",
                        help="count instructions per evaluation under valgrind (one child per checkout and kind) "
                             "instead of timing")
    args = parser.parse_args()
    if args.instructions:
        instruction_counts(args)
        return
    if args.candidates:
        args.models = args.models[:1]
    checkouts = [("this", REPO)] + ([("other", args.vs.resolve())] if args.vs else [])
    print(f"load average before: {load()} ({os.cpu_count()} CPUs)")
    for name in args.models:
        path = MODELS[name]
        if not path.is_file():
            print(f"{name}: {path} not found, skipped")
            continue
        runs: dict[str, list[dict]] = {label: [] for label, _ in checkouts}
        for _ in range(args.rounds):
            for label, checkout in (checkouts if _ % 2 == 0 else checkouts[::-1]):
                runs[label].append(run_child(checkout, path, args.target, args.samples, args.warmup, args.stage,
                                             args.candidates, args.every))
        for kind, target_ms in TARGETS_MS.items():
            if kind not in runs["this"][0]:
                continue
            for field, unit in (("ms", "wall"), ("cpu", "CPU")):
                this = statistics.median(r[kind][field] for r in runs["this"])

                def each(label: str, kind: str = kind, field: str = field) -> str:
                    return ", ".join(f"{r[kind][field]:.1f}" for r in runs[label])

                what = "per task graph" if args.stage == "graph" else "per evaluation"
                line = (f"{name} {kind} ({runs['this'][0][kind]['tasks']:.0f} tasks, median): this "
                        f"{this:.1f} ms {unit} {what} [{each('this')}]")
                if field == "cpu" and kind == "search's candidates":
                    # a search's time follows the mean: a few large candidates weigh more than in the median
                    mean = statistics.median(r[kind]["cpu_mean"] for r in runs["this"])
                    line += f" (mean {mean:.1f} ms over {runs['this'][0][kind]['count']} candidates)"
                if args.vs:
                    other = statistics.median(r[kind][field] for r in runs["other"])
                    line += f", other {other:.1f} ms [{each('other')}], ratio {other / this:.2f}x"
                    if field == "cpu" and kind == "search's candidates":
                        other_mean = statistics.median(r[kind]["cpu_mean"] for r in runs["other"])
                        line += f" (other's mean {other_mean:.1f} ms, ratio {other_mean / mean:.2f}x)"
                if args.stage == "graph":
                    print(line, flush=True)  # (the targets are per evaluation)
                    continue
                verdict = "met" if this <= target_ms else "NOT met"
                print(f"{line}; target {target_ms:.0f} ms: {verdict}", flush=True)
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
