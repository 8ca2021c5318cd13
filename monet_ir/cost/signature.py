"""Op signatures the cost model prices, and the Cost it returns.  Pure data, no IR.

`LoopNestSig` is a conv/matmul-like op written as ZigZag's loop nest

    O[b][g][k][oy][ox] += W[g][k][c][fy][fx] * I[b][g][c][iy][ix],
    iy = sy*oy + dy*fy - pad_top,  ix = sx*ox + dx*fx - pad_left.

A 3-D convolution (video, volumes) has a third window pair, the depth: OZ and FZ, with
iz = sz*oz + dz*fz - pad_front; O is indexed by OZ too, W by FZ, I by the window IZ. Those two
dims exist in `dims` only for such a nest (oz or fz above 1), so every 2-D nest is priced as
before.

The three training uses of a layer are the SAME nest with a different output tensor:
forward writes O (reduction over C, FY, FX); the input gradient writes I = dX from O = dY and W
(reduction over K and the window); the weight gradient writes W = dW from I and O = dY
(reduction over B, OY, OX).  The MAC count is identical in the three.

A matmul ``Y[M,N] = A[M,K] . B[K,N]`` (batched over G) follows ZigZag's Gemm layout with our
names: A is I indexed (B=M, C=K), B is W indexed (C=K, K=N), Y is O indexed (B=M, K=N).

`VectorSig` is everything else (element-wise, reductions, pooling, norms, softmax, optimizer
updates, data movement): priced by lanes, op throughput and memory bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

LOOP_NEST_DIMS = ("B", "G", "K", "C", "OY", "OX", "FY", "FX", "OZ", "FZ")

# Which loop dims index each tensor ("relevant"); IY/IX (IZ) depend on (OY, FY)/(OX, FX) ((OZ,
# FZ)) together ("partially relevant").  Everything else is irrelevant: the tensor is reused
# along it.
RELEVANT_DIMS = {
    "W": ("G", "K", "C", "FY", "FX", "FZ"),
    "I": ("B", "G", "C"),
    "O": ("B", "G", "K", "OY", "OX", "OZ"),
}
PARTIAL_DIMS = {"I": (("OY", "FY"), ("OX", "FX"), ("OZ", "FZ"))}
DEPTH_DIMS = ("OZ", "FZ")


@dataclass(frozen=True)
class NestMapping:
    """A user's mapping of one loop nest (an entry of a ZigZag mapping file), in place of the
    core's dataflow and the mapper's free choice.

    spatial: (array dim, loop dim, factor) unrollings, cut to the array and the layer as ZigZag
        cuts them; () keeps the core's dataflow.
    swap_inputs: the entry's memory_operand_links put W in the I1 memories and I in the I2 ones
        (ZigZag's default links are O: O, W: I2, I: I1).
    temporal: a loop order, innermost first, as (loop dim, size); size 0 is ZigZag's ``*`` (what
        is left of that dim); () leaves the order to the mapper.
    entry: the file and entry it came from (for messages).
    """

    spatial: tuple[tuple[str, str, int], ...] = ()
    swap_inputs: bool = False
    temporal: tuple[tuple[str, int], ...] = ()
    entry: str = field(default="", compare=False, repr=False)


@dataclass(frozen=True)
class LoopNestSig:
    """A conv/matmul-like op as a ZigZag loop nest (sizes of unused dims are 1).

    kind: free label for reporting (``conv``, ``gemm``, ``matmul``, ``conv_grad_input``...).
    b, g, k, c, oy, ox, fy, fx: loop sizes (batch, groups, output channels, input channels,
        output rows/cols, filter rows/cols).
    stride, dilation: (y, x) of the input window.
    pads: ONNX order (top, left, bottom, right); only used to clip the input extent.
    oz, fz, stride_z, dilation_z, pads_z: the depth of a 3-D nest (output and filter depth,
        its window's stride and dilation, front and back padding); 1, 1, 1, 1, (0, 0) otherwise.
    w_bits, i_bits, o_bits: element widths of W, I and O as stored (final values).
    psum_bits: width of partial sums of whichever tensor is the output.
    (Widths may be fractional: an MX format's amortized bits, its shared scales included.)
    mac_width: element bits at the multipliers when they differ from the stored widths (MX
        formats); 0: the wider stored input width.
    mac_format: the MX format at the multipliers ("" for plain formats): a core's precision
        of that name (or family) prices the MACs (`Core.precision_for`).
    output_operand: the tensor written: "O" (forward), "I" (input gradient), "W" (weight grad).
    mapping: the user's mapping of this nest (`NestMapping`), None: the core's dataflow.
    """

    kind: str = "conv"
    b: int = 1
    g: int = 1
    k: int = 1
    c: int = 1
    oy: int = 1
    ox: int = 1
    fy: int = 1
    fx: int = 1
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    pads: tuple[int, int, int, int] = (0, 0, 0, 0)
    w_bits: int = 8
    i_bits: int = 8
    o_bits: int = 8
    psum_bits: int = 16
    output_operand: str = "O"
    mac_width: int = 0
    mac_format: str = ""
    oz: int = 1
    fz: int = 1
    stride_z: int = 1
    dilation_z: int = 1
    pads_z: tuple[int, int] = (0, 0)
    mapping: NestMapping | None = None

    def __post_init__(self) -> None:
        for name in ("b", "g", "k", "c", "oy", "ox", "fy", "fx", "oz", "fz", "stride_z", "dilation_z"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"LoopNestSig.{name} must be a positive integer, got {value!r}")
        if self.output_operand not in ("O", "I", "W"):
            raise ValueError(f"LoopNestSig.output_operand must be O, I or W, got {self.output_operand!r}")
        for name in ("w_bits", "i_bits", "o_bits", "psum_bits"):
            if getattr(self, name) < 1:
                raise ValueError(f"LoopNestSig.{name} must be positive")

    @property
    def has_depth(self) -> bool:
        """Whether the nest has a third window pair (a 3-D convolution)."""
        return self.oz > 1 or self.fz > 1

    @property
    def dims(self) -> dict[str, int]:
        dims = {
            "B": self.b,
            "G": self.g,
            "K": self.k,
            "C": self.c,
            "OY": self.oy,
            "OX": self.ox,
            "FY": self.fy,
            "FX": self.fx,
        }
        if self.has_depth:
            dims["OZ"], dims["FZ"] = self.oz, self.fz
        return dims

    @property
    def macs(self) -> int:
        return self.b * self.g * self.k * self.c * self.oy * self.ox * self.fy * self.fx * self.oz * self.fz

    @property
    def input_extent(self) -> tuple[int, int]:
        """(IY, IX): rows/cols of I actually read (window span minus padding)."""
        span_y = (self.oy - 1) * self.stride[0] + (self.fy - 1) * self.dilation[0] + 1
        span_x = (self.ox - 1) * self.stride[1] + (self.fx - 1) * self.dilation[1] + 1
        iy = max(1, span_y - self.pads[0] - self.pads[2])
        ix = max(1, span_x - self.pads[1] - self.pads[3])
        return iy, ix

    @property
    def input_depth(self) -> int:
        """IZ: the depth of I actually read (1 for a 2-D nest)."""
        span = (self.oz - 1) * self.stride_z + (self.fz - 1) * self.dilation_z + 1
        return max(1, span - self.pads_z[0] - self.pads_z[1])

    def tensor_elements(self, tensor: str) -> int:
        if tensor == "W":
            return self.g * self.k * self.c * self.fy * self.fx * self.fz
        if tensor == "O":
            return self.b * self.g * self.k * self.oy * self.ox * self.oz
        iy, ix = self.input_extent
        return self.b * self.g * self.c * iy * ix * self.input_depth

    def final_bits(self, tensor: str) -> int:
        return {"W": self.w_bits, "I": self.i_bits, "O": self.o_bits}[tensor]

    @property
    def input_tensors(self) -> tuple[str, str]:
        return tuple(t for t in ("W", "I", "O") if t != self.output_operand)  # type: ignore[return-value]

    @property
    def mac_bits(self) -> int:
        """Width of the multiplier inputs (the wider of the two input tensors)."""
        return self.mac_width or max(self.final_bits(t) for t in self.input_tensors)

    def footprint_bytes(self) -> int:
        """Bytes of the three tensors (output at its final width)."""
        bits = sum(self.tensor_elements(t) * self.final_bits(t) for t in ("W", "I", "O"))
        return int(-(-bits // 8))


@dataclass(frozen=True)
class VectorSig:
    """An op for SIMD/pooling cores (or a MAC array that accepts vector kinds).

    kind: ``elementwise``, ``reduction``, ``pool``, ``norm``, ``softmax``, ``optimizer``,
        ``data_movement``, ``loss``...
    elements: output elements.
    ops_per_element: arithmetic ops per output element (e.g. 1 for ReLU, 10 for Adam).
    bytes_read / bytes_written: memory traffic of the op.
    window: pooling window size (elements read per output), 1 otherwise.
    bits: element width.
    window_shape: the window's extent per spatial axis (FY, FX) for pooling ops, () otherwise:
        a pooling array that unrolls FX and FY covers a larger window in several passes.
    """

    kind: str
    elements: int
    ops_per_element: float = 1.0
    bytes_read: int = 0
    bytes_written: int = 0
    window: int = 1
    bits: int = 8
    window_shape: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.elements < 0 or self.bytes_read < 0 or self.bytes_written < 0 or self.ops_per_element < 0:
            raise ValueError("VectorSig sizes must be non-negative")
        if self.window < 1 or self.bits < 1:
            raise ValueError("VectorSig window and bits must be positive")

    @property
    def ops(self) -> float:
        return self.elements * self.ops_per_element * self.window


def frozen_mapping(values: Mapping[str, float]) -> Mapping[str, float]:
    """A read-only view, so a memoized Cost cannot be changed by one of its users."""
    return MappingProxyType(dict(values))


@dataclass(frozen=True)
class Cost:
    """Price of one op on one core.

    latency_cycles: cycles of the core's clock.
    energy_pj: total energy.
    breakdown_pj: "mac" (or "ops"), "<memory>.<operand>" per memory level and tensor
        (e.g. "sram_2MB.W"), "dram.<operand>" for off-chip traffic; sums to energy_pj.
    mem_bytes: bytes the op must hold at once (its operands, at their stored widths).
    core: id of the core priced.
    utilization: useful MACs per cycle / peak (includes spatial under-use and stalls).
    mapping: short text of the chosen spatial/temporal mapping, for debugging.
    dram_bytes: off-chip traffic the op causes (0 when everything fits on chip).
    """

    latency_cycles: float
    energy_pj: float
    breakdown_pj: Mapping[str, float] = field(default_factory=dict, hash=False)
    mem_bytes: int = 0
    core: int = 0
    utilization: float = 0.0
    mapping: str = ""
    dram_bytes: int = 0


def psum_bits_for(bits: int) -> int:
    """Partial-sum width: ZigZag's 16-bit accumulators for 8-bit operands, else the operand width
    (floating-point accumulation in the operand format)."""
    return max(2 * bits, 16) if bits <= 8 else bits
