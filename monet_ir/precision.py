"""Number formats a report can assume for weights, activations and gradients.

Plain formats (`fp32`, `bf16`, `fp16`, `fp8`, `int8`) store every element in its own bits.
Microscaling (MX) formats of the OCP MX v1.0 specification store a block of elements that
share one power-of-two scale (E8M0: 8 bits, bias 127, 0xFF = NaN):

| name | element | element bits | largest element | emax |
|---|---|---|---|---|
| `mxint8` | int8, implicit scale 2^-6 | 8 | 127/64 | 0 |
| `mxfp8_e4m3` | FP8 E4M3 | 8 | 448 | 8 |
| `mxfp8_e5m2` | FP8 E5M2 | 8 | 57344 | 15 |
| `mxfp6_e2m3` | FP6 E2M3 | 6 | 7.5 | 2 |
| `mxfp6_e3m2` | FP6 E3M2 | 6 | 28 | 4 |
| `mxfp4_e2m1` | FP4 E2M1 | 4 | 6 | 2 |

A block is a group of `block` elements: `vector` groups are 1 x k along a tensor's reduction
axis (k = `--mx-block`, 32 by default), `square` groups r x c tiles of a matrix (8 x 8 by
default), valid for W and for its transpose. Storage is exact, scales included:
`numel * element_bits + ceil(numel / block) * scale_bits` bits (4.25 bits per element for
MXFP4 at k = 32).

A `PrecisionPolicy` gives one format per tensor class: `weights` (what the MAC arrays read),
`activations`, `gradients`, `master` (the persistent parameters the optimizer updates) and
`state` (optimizer state). `--precision NAME` sets every class; `--precision
weights=mxfp8_e4m3,activations=mxfp8_e4m3,gradients=mxfp8_e5m2,master=fp32,state=fp32` sets
each (an omitted class takes fp32).
"""

from __future__ import annotations

from dataclasses import dataclass

from monet_ir.errors import MonetError, did_you_mean

PRECISION_BITS = {"fp32": 32, "bf16": 16, "fp16": 16, "fp8": 8, "int8": 8}


@dataclass(frozen=True)
class MXElement:
    """The element type of an MX format: its `ml_dtypes` type name, bits and emax (the
    exponent of its largest normal; the shared scale is 2^(floor(log2 amax) - emax))."""

    dtype: str
    bits: int
    emax: int
    is_int: bool = False


MX_ELEMENTS = {
    "mxint8": MXElement("int8", 8, 0, is_int=True),
    "mxfp8_e4m3": MXElement("float8_e4m3fn", 8, 8),
    "mxfp8_e5m2": MXElement("float8_e5m2", 8, 15),
    "mxfp6_e2m3": MXElement("float6_e2m3fn", 6, 2),
    "mxfp6_e3m2": MXElement("float6_e3m2fn", 6, 4),
    "mxfp4_e2m1": MXElement("float4_e2m1fn", 4, 2),
}
SCALE_BITS = 8  # E8M0
TENSOR_CLASSES = ("weights", "activations", "gradients", "master", "state")
FORMAT_NAMES = (*PRECISION_BITS, *MX_ELEMENTS)


class PrecisionError(MonetError, ValueError):
    """A precision name, policy, block size or group shape that does not exist."""


def precision_bits(name: str | None) -> int | None:
    """Element bits of a precision name; None (or "") keeps each tensor's own element type."""
    if not name:
        return None
    if name in MX_ELEMENTS:
        return MX_ELEMENTS[name].bits
    if name not in PRECISION_BITS:
        raise PrecisionError(f"unknown precision '{name}'{did_you_mean(name, FORMAT_NAMES)} "
                             f"(choose from {', '.join(FORMAT_NAMES)})")
    return PRECISION_BITS[name]


@dataclass(frozen=True)
class MXGroup:
    """The shape of a shared-scale group: `vector` (1 x k along the reduction axis) or
    `square` (rows x cols of the two innermost axes)."""

    kind: str = "vector"
    rows: int = 1
    cols: int = 32

    @property
    def size(self) -> int:
        return self.rows * self.cols

    def covers_transpose(self) -> bool:
        """Whether the same encoding serves a reduction along either matrix axis."""
        return self.kind == "square" and self.rows == self.cols

    def spec(self) -> str:
        return "vector" if self.kind == "vector" else f"square:{self.rows}x{self.cols}"


def parse_group(text: str, block: int = 32) -> MXGroup:
    """`vector` (1 x block) or `square:RxC` (`square` alone: 8x8)."""
    if not isinstance(block, int) or block < 1:
        raise PrecisionError(f"--mx-block {block}: the block size must be a positive integer")
    text = (text or "vector").strip()
    if text == "vector":
        return MXGroup("vector", 1, block)
    if text == "square":
        return MXGroup("square", 8, 8)
    if text.startswith("square:"):
        rows, sep, cols = text[len("square:"):].partition("x")
        if sep and rows.isdigit() and cols.isdigit() and int(rows) > 0 and int(cols) > 0:
            return MXGroup("square", int(rows), int(cols))
    raise PrecisionError(f"--mx-group {text}: expected vector or square:RxC (e.g. square:8x8)")


@dataclass(frozen=True)
class NumberFormat:
    """A format as stored: `element_bits` per element plus, for MX, one `scale_bits` scale per
    `block` elements."""

    name: str
    element_bits: int
    block: int = 0
    scale_bits: int = 0

    @property
    def is_mx(self) -> bool:
        return self.block > 0

    def storage_bits(self, numel: int) -> int:
        scales = -(-numel // self.block) * self.scale_bits if self.block else 0
        return numel * self.element_bits + scales

    def storage_bytes(self, numel: int) -> int:
        return (self.storage_bits(numel) + 7) // 8

    @property
    def amortized_bits(self) -> float:
        """Bits per element, the scale's share included (8.25 for MXFP8 at k = 32)."""
        return self.element_bits + (self.scale_bits / self.block if self.block else 0)


def number_format(name: str, group: MXGroup | None = None) -> NumberFormat:
    bits = precision_bits(name)
    assert bits is not None
    if name in MX_ELEMENTS:
        return NumberFormat(name, bits, (group or MXGroup()).size, SCALE_BITS)
    return NumberFormat(name, bits)


@dataclass(frozen=True)
class PrecisionPolicy:
    """One format name per tensor class, and the MX block shape they share."""

    weights: str
    activations: str
    gradients: str
    master: str
    state: str
    group: MXGroup = MXGroup()

    def format(self, cls: str) -> NumberFormat:
        return number_format(getattr(self, cls), self.group)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(getattr(self, c) for c in TENSOR_CLASSES)

    @property
    def uniform(self) -> str | None:
        """The one format of every class, or None when they differ."""
        return self.weights if len(set(self.names)) == 1 else None

    @property
    def has_mx(self) -> bool:
        return any(n in MX_ELEMENTS for n in self.names)

    @property
    def mac_bits(self) -> int:
        """Element bits the MAC arrays multiply (the wider of weights and activations)."""
        return max(number_format(self.weights).element_bits, number_format(self.activations).element_bits)

    def spec(self) -> str:
        """The whole policy as text (the report's `precision`): a plain uniform policy is its
        name; otherwise every class, and the MX group when a class is MX."""
        if self.uniform and not self.has_mx:
            return self.uniform
        classes = self.uniform or ",".join(f"{c}={getattr(self, c)}" for c in TENSOR_CLASSES)
        if not self.has_mx:
            return classes
        return f"{classes};mx-block={self.group.size};mx-group={self.group.spec()}"

    def as_dict(self) -> dict:
        out: dict = {c: getattr(self, c) for c in TENSOR_CLASSES}
        if self.has_mx:
            out["mx_group"] = self.group.spec()
            out["mx_block"] = self.group.size
            out["bits_per_element"] = {c: self.format(c).amortized_bits for c in TENSOR_CLASSES}
        return out


def parse_precision(text: str, block: int = 32, group: str = "vector") -> PrecisionPolicy:
    """A policy from `--precision` text: one format name (every class) or `class=name,...`
    (classes left out take fp32); `;mx-block=K;mx-group=G` may follow (`PrecisionPolicy.spec`)."""
    text, *extras = (text or "").strip().split(";")
    for extra in extras:
        key, sep, value = (p.strip() for p in extra.partition("="))
        if key == "mx-block" and value.isdigit():
            block = int(value)
        elif key == "mx-group" and sep:
            group = value
        else:
            raise PrecisionError(f"--precision: '{extra}' is not mx-block=K or mx-group=vector|square:RxC")
    shape = parse_group(group, block)
    text = text.strip()
    if "=" not in text:
        try:
            precision_bits(text or "?")
        except PrecisionError as e:
            raise PrecisionError(f"--precision {text}: {e}") from None
        return PrecisionPolicy(text, text, text, text, text, shape)
    chosen: dict[str, str] = {}
    for item in text.split(","):
        cls, sep, name = (s.strip() for s in item.partition("="))
        if not sep or cls not in TENSOR_CLASSES:
            raise PrecisionError(f"--precision {text}: '{item}' is not CLASS=FORMAT with CLASS one of "
                                 f"{', '.join(TENSOR_CLASSES)}")
        if cls in chosen:
            raise PrecisionError(f"--precision {text}: class '{cls}' given twice")
        try:
            precision_bits(name or "?")
        except PrecisionError as e:
            raise PrecisionError(f"--precision {text}: {cls}: {e}") from None
        chosen[cls] = name
    return PrecisionPolicy(*(chosen.get(c, "fp32") for c in TENSOR_CLASSES), group=shape)


def policy_spec(text: str | None, block: int = 32, group: str = "vector") -> str | None:
    """`--precision` with `--mx-block`/`--mx-group` folded in, as one text (None without one)."""
    return parse_precision(text, block, group).spec() if text else None
