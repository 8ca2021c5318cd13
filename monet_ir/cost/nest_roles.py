"""The tensors of a loop nest bound to memory roles (step 1 of `monet_ir.cost.loopnest`).

The output tensor lives in the core's ``O`` memories; of the two inputs, the forward weight W (or,
for the weight gradient, dY) takes the ``W`` memories and the other the ``I`` memories.
`tensor_infos` says, per tensor, which loop dimensions are relevant, partially relevant (the
sliding windows of convolutions) or irrelevant to it; `tensor_elements` and `grow` count the
elements a block of loops touches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .signature import RELEVANT_DIMS, LoopNestSig

ROLES = ("W", "I", "O")


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the nest bound to a memory role."""

    name: str  # W, I or O: which tensor of the forward nest
    role: str  # W, I or O: which memories hold it
    is_output: bool
    relevant: tuple  # in `RELEVANT_DIMS`' order: products over them are rounded the same in every process
    partial: tuple  # ((out_dim, filter_dim, stride, dilation, full_extent), ...)
    irrelevant: frozenset
    bits: int  # stored width of inputs, final width of the output
    psum_bits: int
    partial_of: frozenset = frozenset()  # dims of the partially relevant window pairs


def tensor_infos(sig: LoopNestSig) -> dict[str, TensorInfo]:
    """Tensors keyed by role."""
    dims = sig.dims
    iy, ix = sig.input_extent
    partial_i = (
        ("OY", "FY", sig.stride[0], sig.dilation[0], iy),
        ("OX", "FX", sig.stride[1], sig.dilation[1], ix),
    )
    if sig.has_depth:
        partial_i += (("OZ", "FZ", sig.stride_z, sig.dilation_z, sig.input_depth),)
    out = sig.output_operand
    inputs = sig.input_tensors
    # The forward weight keeps the weight memories when it is an input; for the weight gradient
    # dY (forward O) takes them, being the operand reused across the array's first dimension.
    w_role = "W" if "W" in inputs else "O"
    i_role = next(t for t in inputs if t != w_role)
    if sig.mapping is not None and sig.mapping.swap_inputs:
        # a mapping file's memory_operand_links put the two inputs in each other's memories
        w_role, i_role = i_role, w_role
    binding = {"O": out, "W": w_role, "I": i_role}
    infos = {}
    for role, tensor in binding.items():
        # a 2-D nest has no depth dims: they stay out of its tensors' relevant dims
        relevant_order = tuple(d for d in RELEVANT_DIMS[tensor] if d in dims)
        relevant = set(relevant_order)
        partial = partial_i if tensor == "I" else ()
        partial_dims = {d for p in partial for d in p[:2]}
        irrelevant = frozenset(d for d in dims if d not in relevant and d not in partial_dims)
        infos[role] = TensorInfo(
            name=tensor,
            role=role,
            is_output=role == "O",
            relevant=relevant_order,
            partial=partial,
            irrelevant=irrelevant,
            bits=sig.final_bits(tensor),
            psum_bits=sig.psum_bits,
            partial_of=frozenset(partial_dims),
        )
    return infos


def pr_extent(a: int, b: int, sa: int, sb: int, full: int) -> int:
    """Distinct input indices sa*x + sb*y for x < a, y < b (ZigZag's closed form), clipped to
    the tensor's extent."""
    g = math.gcd(sa, sb)
    size = a * b - max(0, b - sa // g) * (a - sb // g)
    return min(full, size)


def tensor_elements(info: TensorInfo, sizes: dict) -> float:
    """Elements of the tensor touched by loops of the given per-dim sizes."""
    total = 1.0
    get = sizes.get
    for dim in info.relevant:
        total *= get(dim, 1)
    for out_dim, filt_dim, stride, dilation, full in info.partial:
        # ZigZag truncates fractional (spatially unrolled) sizes of window dims.  (`pr_extent`,
        # inlined: the loop-nest search counts elements tens of thousands of times.)
        a, b = int(get(out_dim, 1)), int(get(filt_dim, 1))
        g = math.gcd(stride, dilation)
        size = a * b - max(0, b - stride // g) * (a - dilation // g)
        total *= full if full < size else size
    return total


def grow(info: TensorInfo, sizes: dict, elements: float, loops) -> tuple[dict, float]:
    """`sizes` and the tensor's element count after adding `loops`, updating the count
    incrementally (only the partially relevant input window needs a recount)."""
    if not loops:
        return sizes, elements
    grown = dict(sizes)
    recount = False
    relevant = info.relevant
    partial = info.partial_of
    for dim, size in loops:
        grown[dim] = grown.get(dim, 1) * size
        if dim in relevant:
            elements *= size
        elif dim in partial:
            recount = True
    if recount:
        elements = tensor_elements(info, grown)
    return grown, elements


def _product(sizes: dict) -> float:
    total = 1.0
    for value in sizes.values():
        total *= value
    return total


def _merge(sizes: dict, loops) -> dict:
    merged = dict(sizes)
    for dim, size in loops:
        merged[dim] = merged.get(dim, 1) * size
    return merged
