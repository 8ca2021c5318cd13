"""Number formats a report can assume for weights, activations and gradients."""

PRECISION_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8}


def precision_bits(name: str | None) -> int | None:
    """Bits of a precision name; None (or "") keeps each tensor's own element type."""
    if not name:
        return None
    if name not in PRECISION_BITS:
        raise ValueError(f"unknown precision '{name}' (choose from {', '.join(sorted(PRECISION_BITS))})")
    return PRECISION_BITS[name]
