"""Which number formats a training step is priced in on a target.

The user's `--precision` wins (one format for every tensor class, or a policy per class, MX
formats included: `monet_ir.precision`); otherwise the target's `default_precision` (a
built-in's native format, the one precision of Stream/ZigZag cores); otherwise each tensor
keeps its own element type. A format is usable when every core can run it or a wider format
(`Core.precision_for`, by element bits); a policy is usable when every core runs the formats
of weights, activations and gradients (what the MAC arrays multiply).
"""

from __future__ import annotations

from dataclasses import dataclass

from monet_ir.precision import FORMAT_NAMES, PRECISION_BITS, PrecisionError, PrecisionPolicy, parse_precision, precision_bits

from .errors import TargetError
from .model import Target


@dataclass(frozen=True)
class PrecisionChoice:
    """name: the format or the whole policy as text (None: the tensors' own element types);
    source: why it was chosen; policy: the formats per tensor class (None with name None)."""

    name: str | None
    source: str
    policy: PrecisionPolicy | None = None

    @property
    def bits(self) -> int | PrecisionPolicy | None:
        """What the cost adapters take: None, the width of one plain format for every tensor,
        or the policy (MX formats, or classes in different formats)."""
        if self.policy is None:
            return PRECISION_BITS[self.name] if self.name else None
        if self.policy.uniform and not self.policy.has_mx:
            return PRECISION_BITS[self.policy.uniform]
        return self.policy

    @property
    def mac_format(self) -> str | None:
        """The format the MAC arrays multiply (weights)."""
        return self.policy.weights if self.policy is not None else self.name

    def describe(self) -> str:
        return f"{self.name or 'element types of the model'} ({self.source})"


def unsupported_precision(target: Target, name: str) -> list[str]:
    """One line per core that cannot run `name` (nor a wider format), naming what it runs."""
    bits = precision_bits(name)
    return [
        f"core {core.id} ('{core.name}') cannot run {name}; it runs {', '.join(p.name for p in core.precisions)}"
        for core in target.cores if core.precision_for(bits) is None
    ]


def choose_precision(target: Target, requested: str | PrecisionPolicy | None) -> PrecisionChoice:
    """The precision a step on `target` is priced in; a TargetError when `requested` is unknown or
    some core cannot run it."""
    if requested:
        try:
            policy = requested if isinstance(requested, PrecisionPolicy) else parse_precision(requested)
        except PrecisionError as e:
            raise TargetError(str(e) if str(e).startswith("--precision") else f"--precision {requested}: {e}") from None
        for name in dict.fromkeys((policy.weights, policy.activations, policy.gradients)):
            problems = unsupported_precision(target, name)
            if problems:
                runnable = [p for p in FORMAT_NAMES if not unsupported_precision(target, p)]
                raise TargetError(
                    f"{target.source or target.name}: --precision {policy.spec()}: {problems[0]} "
                    f"(precisions every core of '{target.name}' runs: {', '.join(runnable) or 'none'})"
                )
        return PrecisionChoice(policy.spec(), "--precision", policy)
    if target.default_precision:
        reason = target.default_precision_reason or f"default of target '{target.name}'"
        if target.default_precision in PRECISION_BITS:
            return PrecisionChoice(target.default_precision, reason)
        policy = parse_precision(target.default_precision)
        return PrecisionChoice(policy.spec(), reason, policy)
    return PrecisionChoice(None, "the model's own element types: no --precision, no target default")
