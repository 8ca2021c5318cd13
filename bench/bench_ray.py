"""Evaluations per second of `monet explore`'s backends, and the per-task overhead Ray adds.

    python bench/bench_ray.py [--model PATH] [--target tpu_like_quad_core] [--candidates 96]
                              [--batch 32] [--genes checkpoint,allocation] [--cpus 2]

On the small GPT-2 at batch 8 (`$MONET_SHARED/models` or ../shared/models; skipped when absent)
the same random candidates (layer by layer: random recompute set and core allocation, drawn with
a fixed seed) are evaluated, in batches of `--batch` as a search's generations are, by

- `--jobs 1`: the local backend in this process;
- `--jobs 2`: the local backend on 2 worker processes (forked: they inherit the built step);
- `--backend ray`: Ray tasks on a local Ray runtime with `--cpus` CPUs (`ray.init(num_cpus=...)`).

Each backend first evaluates a warm-up batch (other candidates: the cost model's tables, and on
Ray each worker's build of the step, which is reported apart) and then the measured candidates.
The measured candidates are then evaluated `--rounds` times, the backends taking turns (so
that the load of a shared machine falls on all alike), and the median round counts. A fourth
row, `--jobs 2 (own step)`, has forked workers build their own step instead of inheriting it.
Printed: evaluations per second and wall ms per evaluation of each, the speed-up over `--jobs 1`,
the mean evaluation time measured inside the workers, and Ray's overhead:

- per task: the wall time of a task that does nothing, on the same runtime (ms per task, and
  how many tasks a search of this size sends: about 4 per CPU and generation);
- end to end: Ray's wall time per evaluation against the local pool's with the same parallelism,
  (ray - jobs2) / jobs2. Target: at most 10 % at 20 ms or more per evaluation.

Results are also checked to be identical across the three backends.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SHARED = Path(os.environ.get("MONET_SHARED", REPO.parent / "shared"))
TARGET_OVERHEAD = 0.10


@dataclass
class TimedWork:
    """The explore work, also returning how long each evaluation took inside the worker."""

    inner: Any
    key: str

    def build(self):
        return self.inner.build()

    def run(self, state, item):
        start = time.perf_counter()
        result = self.inner.run(state, item)
        return result, time.perf_counter() - start

    def failed(self, item, reason):
        return self.inner.failed(item, reason), 0.0


def noop(boxed, key, items):
    return items


def candidates(spec, count: int, seed: int):
    rng = random.Random(seed)
    out, seen = [], set()
    while len(out) < count:
        genome = tuple(rng.randrange(n) for n in spec.sizes)
        if genome not in seen:
            seen.add(genome)
            out.append(spec.decode(genome))
    return out


def warm(backend, warmup) -> float:
    start = time.perf_counter()
    backend.map(warmup)
    return time.perf_counter() - start


def measure(backend, measured, batch: int) -> tuple[float, list, list[float]]:
    """Wall time of the measured candidates in batches, their results, in-worker seconds."""
    results = []
    start = time.perf_counter()
    for first in range(0, len(measured), batch):
        results += backend.map(measured[first:first + batch])
    return time.perf_counter() - start, [r for r, _ in results], [seconds for _, seconds in results]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=SHARED / "models" / "gpt2_small_b8.onnx")
    parser.add_argument("--target", default="tpu_like_quad_core")
    parser.add_argument("--candidates", type=int, default=96)
    parser.add_argument("--batch", type=int, default=32, help="candidates per map call (a generation's new ones)")
    parser.add_argument("--genes", default="checkpoint,allocation")
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds per backend (median wall time)")
    args = parser.parse_args()
    if not args.model.is_file():
        print(f"skipped: {args.model} not found (set MONET_SHARED or --model)")
        return
    try:
        import ray  # noqa: F401
    except ImportError:
        print("skipped: Ray is not installed (pip install -e '.[ray]')")
        return
    from monet_ir.explore import dispatch, ga
    from monet_ir.explore.cli import parse_search
    from monet_ir.explore.evaluate import Evaluator, StepConfig, tuned_collection

    checkpointing, allocation, fusion = parse_search(args.genes)
    config = StepConfig(str(args.model), args.target)
    start = time.perf_counter()
    evaluator = Evaluator(config)
    build_s = time.perf_counter() - start
    spec = ga.GenomeSpec.of(evaluator, "schedule", checkpointing, allocation, fusion)
    warmup = candidates(spec, 2 * args.cpus, seed=1)
    measured = candidates(spec, args.candidates, seed=2)
    print(f"{args.model.name} on {args.target}: step built in {build_s:.1f} s; {len(spec)} genes ({args.genes}); "
          f"{len(measured)} candidates in batches of {args.batch}, after a warm-up of {len(warmup)}")
    backends: dict[str, Any] = {}
    rows: dict[str, dict[str, Any]] = {}
    with tuned_collection(), dispatch.ray_session(num_cpus=args.cpus) as ray:
        for jobs in (1, 2):
            work = TimedWork(ga.ExploreWork(config, "schedule"), "timed")
            backends[f"--jobs {jobs}"] = dispatch.LocalBackend(work, jobs, state=Evaluator(config))
        # the old way: forked workers that build their own step instead of inheriting it
        backends["--jobs 2 (own step)"] = dispatch.LocalBackend(TimedWork(ga.ExploreWork(config, "schedule"), "own"), 2)
        files = ga.shipped_files(config)
        inner = ga.ExploreWork(config, "schedule", files, ga.work_key(config, "schedule", files))
        ray_name = f"--backend ray ({args.cpus} CPUs)"
        backends[ray_name] = dispatch.RayBackend(TimedWork(inner, inner.key))
        try:
            for name, backend in backends.items():
                rows[name] = {"warmup": warm(backend, warmup), "walls": [], "inner": []}
            for _ in range(args.rounds):  # rounds alternate the backends: a shared machine's load hits all alike
                for name, backend in backends.items():
                    wall, results, inner_s = measure(backend, measured, args.batch)
                    rows[name]["walls"].append(wall)
                    rows[name]["inner"] += inner_s
                    rows[name]["results"] = results
            task = ray.remote(num_cpus=1)(noop)
            ray.get([task.remote([None], "", [i]) for i in range(20)])  # workers up
            start = time.perf_counter()
            n = 200
            ray.get([task.remote([None], "", [i]) for i in range(n)])
            noop_ms = (time.perf_counter() - start) / n * 1e3 * args.cpus  # CPU-ms per task
        finally:
            for backend in backends.values():
                backend.close()
    for row in rows.values():
        row["wall"] = statistics.median(row["walls"])
        row["rate"] = len(measured) / row["wall"]
        row["ms"] = row["wall"] / len(measured) * 1e3
        row["inner_ms"] = statistics.mean(row["inner"]) * 1e3
    base = rows["--jobs 1"]
    print(f"{'backend':<24}{'evals/s':>9}{'ms/eval (wall)':>16}{'speed-up':>10}{'in-worker ms':>14}{'warm-up s':>11}")
    for name, row in rows.items():
        print(f"{name:<24}{row['rate']:>9.1f}{row['ms']:>16.1f}{base['wall'] / row['wall']:>9.2f}x"
              f"{row['inner_ms']:>14.1f}{row['warmup']:>11.1f}")
    same = all(row["results"] == base["results"] for row in rows.values())
    print(f"results identical across backends: {same}")
    ray_row = rows[ray_name]
    local2 = rows["--jobs 2"]
    end_to_end = (ray_row["wall"] - local2["wall"]) / local2["wall"]
    tasks = len(range(0, len(measured), args.batch)) * min(args.batch, 4 * args.cpus)
    per_eval = tasks * noop_ms / len(measured)
    print(f"Ray per-task cost (no-op task, CPU-ms): {noop_ms:.2f} ms; {tasks} tasks for {len(measured)} evaluations: "
          f"{per_eval:.2f} ms per evaluation = {per_eval / base['inner_ms'] * 100:.1f} % of the "
          f"{base['inner_ms']:.1f} ms evaluation")
    print(f"Ray end to end against --jobs 2: {end_to_end * 100:+.1f} % wall time per evaluation "
          f"(target <= {TARGET_OVERHEAD * 100:.0f} % at >= 20 ms per evaluation: "
          f"{'met' if end_to_end <= TARGET_OVERHEAD else 'NOT met'}; evaluations here {base['inner_ms']:.1f} ms)")


if __name__ == "__main__":
    main()
