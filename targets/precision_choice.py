"""Which number format a training step is priced in on a target.

The user's `--precision` wins; otherwise the target's `default_precision` (a built-in's native
format, the one precision of Stream/ZigZag cores); otherwise each tensor keeps its own element
type. A precision is usable when every core can run it or a wider format (`Core.precision_for`).
"""

from __future__ import annotations

from dataclasses import dataclass

from monet_ir.precision import PRECISION_BITS

from .errors import TargetError
from .model import Target


@dataclass(frozen=True)
class PrecisionChoice:
    """name: the format (None: the tensors' own element types); source: why it was chosen."""

    name: str | None
    source: str

    @property
    def bits(self) -> int | None:
        return PRECISION_BITS[self.name] if self.name else None

    def describe(self) -> str:
        return f"{self.name or 'element types of the model'} ({self.source})"


def unsupported_precision(target: Target, name: str) -> list[str]:
    """One line per core that cannot run `name` (nor a wider format), naming what it runs."""
    bits = PRECISION_BITS[name]
    return [
        f"core {core.id} ('{core.name}') cannot run {name}; it runs {', '.join(p.name for p in core.precisions)}"
        for core in target.cores if core.precision_for(bits) is None
    ]


def choose_precision(target: Target, requested: str | None) -> PrecisionChoice:
    """The precision a step on `target` is priced in; a TargetError when `requested` is unknown or
    some core cannot run it."""
    if requested:
        if requested not in PRECISION_BITS:
            raise TargetError(f"--precision {requested}: unknown precision (choose from {', '.join(PRECISION_BITS)})")
        problems = unsupported_precision(target, requested)
        if problems:
            runnable = [p for p in PRECISION_BITS if not unsupported_precision(target, p)]
            raise TargetError(
                f"{target.source or target.name}: --precision {requested}: {problems[0]} "
                f"(precisions every core of '{target.name}' runs: {', '.join(runnable) or 'none'})"
            )
        return PrecisionChoice(requested, "--precision")
    if target.default_precision:
        reason = target.default_precision_reason or f"default of target '{target.name}'"
        return PrecisionChoice(target.default_precision, reason)
    return PrecisionChoice(None, "the model's own element types: no --precision, no target default")
