"""A parallel plan and its spelling on the command line: `dp=8,tp=1,pp=1,zero=1,microbatches=4`
(also `schedule=gpipe|1f1b` for the pipeline, `bucket=BYTES`, `algorithm=ring|tree|hierarchical`).

Chips are numbered with tensor-parallel ranks innermost, then data-parallel, then pipeline
stages (Megatron's order, so a tensor-parallel group sits inside a node):
`chip = (stage * dp + replica) * tp + shard`.
"""

from __future__ import annotations

from dataclasses import dataclass

from monet_ir.errors import UsageError

KEYS = ("dp", "tp", "pp", "zero", "microbatches", "schedule", "bucket", "algorithm")


@dataclass(frozen=True)
class Plan:
    dp: int = 1
    tp: int = 1
    pp: int = 1
    zero: int = 0
    microbatches: int = 1
    schedule: str = "1f1b"
    bucket: int = 25_000_000
    algorithm: str = "ring"

    @property
    def chips(self) -> int:
        return self.dp * self.tp * self.pp

    def spec(self) -> str:
        text = f"dp={self.dp},tp={self.tp},pp={self.pp},zero={self.zero},microbatches={self.microbatches}"
        text += "" if self.pp == 1 or self.schedule == "1f1b" else f",schedule={self.schedule}"
        return text + ("" if self.algorithm == "ring" else f",algorithm={self.algorithm}")

    def chip(self, stage: int, replica: int, shard: int) -> int:
        return (stage * self.dp + replica) * self.tp + shard

    def groups(self, kind: str) -> list[list[int]]:
        """Every group of `kind` (dp, tp or pp), each a list of chip ids."""
        if kind == "dp":
            return [[self.chip(s, r, t) for r in range(self.dp)] for s in range(self.pp) for t in range(self.tp)]
        if kind == "tp":
            return [[self.chip(s, r, t) for t in range(self.tp)] for s in range(self.pp) for r in range(self.dp)]
        if kind == "pp":
            return [[self.chip(s, r, t) for s in range(self.pp)] for r in range(self.dp) for t in range(self.tp)]
        raise ValueError(f"unknown group kind {kind!r}")


def parse_plan(text: str, option: str = "--parallel") -> Plan:
    from monet_ir.options import parse_size

    values: dict[str, object] = {}
    for entry in (e.strip() for e in text.split(",") if e.strip()):
        key, sep, value = entry.partition("=")
        if not sep or key not in KEYS:
            raise UsageError(f"{option} {text}: '{entry}' is not KEY=VALUE with KEY one of {', '.join(KEYS)}")
        if key == "algorithm":
            if value not in ("ring", "tree", "hierarchical"):
                raise UsageError(f"{option} {text}: algorithm must be ring, tree or hierarchical, got '{value}'")
            values[key] = value
        elif key == "schedule":
            if value not in ("gpipe", "1f1b"):
                raise UsageError(f"{option} {text}: schedule must be gpipe or 1f1b, got '{value}'")
            values[key] = value
        elif key == "bucket":
            values[key] = parse_size(value, f"{option} bucket=")
        else:
            if not value.isdigit():
                raise UsageError(f"{option} {text}: {key} must be a non-negative integer, got '{value}'")
            values[key] = int(value)
    plan = Plan(**values)  # type: ignore[arg-type]
    for key in ("dp", "tp", "pp", "microbatches"):
        if getattr(plan, key) < 1:
            raise UsageError(f"{option} {text}: {key} must be at least 1")
    if plan.zero > 3:
        raise UsageError(f"{option} {text}: zero must be 0, 1, 2 or 3, got {plan.zero}")
    return plan
