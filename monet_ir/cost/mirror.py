"""The mirror-nest check: a layer's forward, input-gradient and weight-gradient nests do the same
MACs over the same loops, so on a core whose array runs all three their cycles must not be more
than `LIMIT` apart, unless the difference is explained by what the core's dataflow can unroll
for each (their spatial units) or by operand sizes (which tensors must stream from DRAM).
An unexplained gap means the mapper found a bad mapping for one of them, or a good one the
others may not use (tests/unit/test_mirror_nests.py on a small corpus, bench/bench_mirror_nests.py
on the whole export corpus).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from targets.model import Core

from .loopnest import NestModel
from .model import CostError, can_run, cost_of
from .signature import LoopNestSig

LIMIT = 2.0
NEST_NAMES = {"O": "forward", "I": "input gradient", "W": "weight gradient"}


@dataclass(frozen=True)
class MirrorCheck:
    """The three nests of one layer on one core: their cycles, spatial units and spilled tensors,
    the ratio of the slowest to the fastest, and why it exceeds LIMIT ("" when it does not, or
    when nothing explains it: then `unexplained`)."""

    cycles: tuple[float, float, float]
    units: tuple[int, int, int]
    spilled: tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]
    ratio: float
    explanation: str

    @property
    def unexplained(self) -> bool:
        return self.ratio > LIMIT and not self.explanation


def mirror_nests(forward: LoopNestSig) -> tuple[LoopNestSig, LoopNestSig, LoopNestSig]:
    base = forward.kind
    return (forward, replace(forward, kind=f"{base}_grad_input", output_operand="I"),
            replace(forward, kind=f"{base}_grad_weight", output_operand="W"))


def mirror_check(forward: LoopNestSig, core: Core) -> MirrorCheck | None:
    """The check of `forward`'s three nests on `core`; None when the core cannot run all three."""
    nests = mirror_nests(forward)
    if not all(can_run(nest, core) for nest in nests):
        return None
    try:
        costs = [cost_of(nest, core) for nest in nests]
    except CostError:
        return None
    models = [NestModel(nest, core) for nest in nests]
    cycles = tuple(cost.latency_cycles for cost in costs)
    units = tuple(model.spatial_units for model in models)
    spilled = tuple(tuple(_spilled(cost)) for cost in costs)
    slow = max(range(3), key=lambda i: cycles[i])
    fast = min(range(3), key=lambda i: cycles[i])
    ratio = cycles[slow] / cycles[fast] if cycles[fast] else 1.0
    explanation = ""
    if ratio > LIMIT:
        names = [NEST_NAMES[n.output_operand] for n in nests]
        spatial_ratio = units[fast] / units[slow]
        if ratio / spatial_ratio <= LIMIT:
            explanation = (f"the core's dataflow unrolls {units[fast]} units for the {names[fast]} and "
                           f"{units[slow]} for the {names[slow]}")
        elif set(spilled[slow]) != set(spilled[fast]):
            explanation = (f"operand sizes: the {names[slow]} streams {','.join(spilled[slow]) or 'nothing'} from "
                           f"DRAM, the {names[fast]} {','.join(spilled[fast]) or 'nothing'}")
    return MirrorCheck(cycles, units, spilled, ratio, explanation)  # type: ignore[arg-type]


def _spilled(cost) -> list[str]:
    """The tensors a cost's mapping streams from DRAM (its "dram W,I" part)."""
    for part in cost.mapping.split(";"):
        part = part.strip()
        if part.startswith("dram "):
            return [t for t in part[len("dram "):].split(",") if t and t != "-"]
    return []
