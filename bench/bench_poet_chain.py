"""Checkmate-style linear chains with unit costs (n forward ops, the loss, n backward ops; every
output 1 byte, every op 1 cycle and 1 pJ): the exact keep/recompute MILP of
monet_ir/explore/poet.py against the known optimum of this plan space.

    python bench/bench_poet_chain.py [--sizes 8,12,16,20,24,28,32] [--time-limit 60]

Our plans recompute each dropped output once, its segment's clones together before the
segment's first backward reader (Chen et al.'s one-level checkpointing, what
`activation-checkpoint` applies), so the optimum with k kept outputs is n - k recomputations and
the closed form is: k checkpoints fit a budget of B bytes iff the dropped runs fit under them,
the run after i checkpoints holding at most B - 1 - i outputs (i kept, the run, the gradient),
and the last run is empty when k + 2 > B (the loss needs the kept outputs, the last output and
the gradient at once). The dynamic program `poet.chain_optimum` is the same optimum computed
step by step. Prints, per (n, budget): closed form, dynamic program, MILP, its status and time.
"""

from __future__ import annotations

import argparse
import math
import time

from monet_ir.explore import poet


def closed_form(n: int, budget: int) -> int | None:
    """Least recomputations of the chain under `budget` (None: infeasible)."""
    for k in range(n, -1, -1):
        if k + 1 > budget:
            continue
        room = sum(max(0, budget - 1 - i) for i in range(k))
        room += max(0, budget - 1 - k) if k + 2 <= budget else 0
        if room >= n - k:
            return n - k
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8,12,16,20,24,28,32")
    parser.add_argument("--time-limit", type=float, default=60.0)
    args = parser.parse_args()
    print(f"{'n':>4} {'budget':>7} {'closed form':>12} {'DP':>5} {'MILP':>5}  {'status':<28} {'vars':>6} {'rows':>6} {'s':>7}")
    agree = total = 0
    for n in (int(v) for v in args.sizes.split(",")):
        model = poet.chain_model(n)
        least = next(b for b in range(1, n + 3) if poet.chain_optimum(n, b) is not None)
        budgets = sorted({least - 1, least, least + 1, int(math.ceil(2 * math.sqrt(n))) + 1, n // 2 + 1, n + 2})
        for budget in budgets:
            form, dp = closed_form(n, budget), poet.chain_optimum(n, budget)
            start = time.perf_counter()
            sol = poet.solve(model, budget, page=False, time_limit=args.time_limit)
            seconds = time.perf_counter() - start
            found = None if not sol.decisions else round(sol.energy_pj - model.base_energy)
            total += 1
            agree += form == dp == found and not sol.status.endswith("(none found)")
            show = lambda v: "-" if v is None else str(v)  # noqa: E731
            print(f"{n:>4} {budget:>7} {show(form):>12} {show(dp):>5} {show(found):>5}  {sol.status:<28} "
                  f"{sol.variables:>6} {sol.constraints:>6} {seconds:>7.2f}")
    print(f"closed form = dynamic program = MILP on {agree} of {total} (n, budget) pairs")


if __name__ == "__main__":
    main()
