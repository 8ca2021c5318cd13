"""The loop nest of a convolution from its shapes and attributes: the one builder both the
ONNX reader (`onnx_layers`, the Python API) and the IR signatures (`analysis.ir_signatures`, the
command line) use, so a layer has the same signature on either path.

A 1-D convolution is a 2-D one of height 1; a 3-D one has the depth as its first spatial axis
(OZ, FZ: ONNX's [N, C, D, H, W]).  ONNX's end padding is cut to what the last window
reaches: a strided window may stop short of it (a 3x3 stride-2 conv on an even input with pads
1,1 reads one padded row and column, not two), and the nest's input extent must equal the rows
and columns actually read.
"""

from __future__ import annotations

from collections.abc import Sequence

from .signature import LoopNestSig


class NotAConvNest(ValueError):
    """The convolution has a form the loop nest does not describe (more than 3 spatial axes)."""


def conv_output_size(size: int, kernel: int, stride: int, dilation: int, begin: int, end: int) -> int:
    """Output positions along one axis (ONNX's floor formula)."""
    return (size + begin + end - dilation * (kernel - 1) - 1) // stride + 1


def reached_end_padding(size: int, out: int, kernel: int, stride: int, dilation: int, begin: int, end: int) -> int:
    """The part of the end padding the last window reads."""
    span = (out - 1) * stride + (kernel - 1) * dilation + 1
    return max(0, min(end, span - begin - size))


def conv_loop_nest(kind: str, x_shape: Sequence[int], w_shape: Sequence[int], strides: Sequence[int],
                   pads: Sequence[int], dilations: Sequence[int], group: int, output: str,
                   bits: tuple[int, int, int, int]) -> LoopNestSig:
    """The nest of a convolution of input `x_shape` [N, C, *spatial] by weights `w_shape`
    [K, C/group, *kernel]; `pads` in ONNX order (begins, then ends); `bits`: W, I, O and
    partial-sum widths; `output`: the tensor written (O forward, I input gradient, W weight
    gradient)."""
    spatial = len(x_shape) - 2
    if spatial not in (1, 2, 3) or len(w_shape) != spatial + 2:
        raise NotAConvNest(f"{spatial}-D convolutions are not described by the loop nest (1 to 3 spatial axes are)")
    strides = list(strides) or [1] * spatial
    dilations = list(dilations) or [1] * spatial
    pads = list(pads) or [0] * (2 * spatial)
    sizes = list(x_shape[2:])
    kernel = list(w_shape[2:])
    begins, ends = pads[:spatial], pads[spatial:]
    outs = [conv_output_size(sizes[i], kernel[i], strides[i], dilations[i], begins[i], ends[i]) for i in range(spatial)]
    ends = [reached_end_padding(sizes[i], outs[i], kernel[i], strides[i], dilations[i], begins[i], ends[i])
            for i in range(spatial)]
    if spatial == 1:
        sizes, kernel, outs = [1, *sizes], [1, *kernel], [1, *outs]
        strides, dilations, begins, ends = [1, *strides], [1, *dilations], [0, *begins], [0, *ends]
    depth = {}
    if spatial == 3:
        depth = {"oz": max(1, outs[0]), "fz": kernel[0], "stride_z": strides[0], "dilation_z": dilations[0],
                 "pads_z": (begins[0], ends[0])}
        sizes, kernel, outs, strides, dilations, begins, ends = (
            v[1:] for v in (sizes, kernel, outs, strides, dilations, begins, ends))
    w_bits, i_bits, o_bits, psum_bits = bits
    return LoopNestSig(
        kind=kind, b=max(1, x_shape[0]), g=group, k=max(1, w_shape[0] // group), c=max(1, w_shape[1]),
        oy=max(1, outs[0]), ox=max(1, outs[1]), fy=kernel[0], fx=kernel[1],
        stride=(strides[0], strides[1]), dilation=(dilations[0], dilations[1]),
        pads=(begins[0], begins[1], ends[0], ends[1]),
        w_bits=w_bits, i_bits=i_bits, o_bits=o_bits, psum_bits=psum_bits, output_operand=output, **depth,
    )


def same_pads(sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
              upper: bool) -> list[int]:
    """ONNX's SAME_UPPER / SAME_LOWER padding (begins, then ends): the output has ceil(size /
    stride) positions, the odd pixel of padding goes to the end (upper) or the beginning."""
    begins, ends = [], []
    for n, k, s, d in zip(sizes, kernel, strides, dilations, strict=True):
        out = -(-n // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
        small, big = total // 2, total - total // 2
        begins.append(small if upper else big)
        ends.append(big if upper else small)
    return begins + ends
