"""Static bounds of data-dependent counts: a mixture of experts' routing.

A mixture of experts routes each token to its top-k experts (`TopK` of the router's scores),
builds a mask per expert (`OneHot`, comparisons), lists the tokens of each expert (`NonZero`),
gathers them, runs the expert and adds the results back (`ScatterElements` with reduction add,
PyTorch's `index_add`). How many tokens an expert receives is known only when the step runs; MONET
needs static shapes, so the count gets a static bound, the capacity MoE training frameworks give
each expert (GShard, Switch Transformer, DeepSpeed-MoE):

    tokens per expert = capacity factor x tokens x k / experts

It is found by mechanism, not by pattern: the importer evaluates the routing decisions of every
TopK (ArgMax) on data under *balanced routing* (token t's j-th choice is expert (t·k + j) mod E,
each expert receiving tokens x k / experts of them) and carries that value along every integer or
boolean computation that follows from decisions and constants alone (`RoutingShadow`); a
NonZero of such a mask is bounded by ceil(capacity factor x its true elements under balanced
routing), at most its input's size. A NonZero of a mask computed from data by other means (a
threshold on activations) is bounded by its input's size (every element true), with a notice.
With the default capacity factor 1.0 the experts together process exactly tokens x k rows, what
a dropless MoE computes (Mixtral); a larger factor prices the padded capacity buffers (or the
imbalance) of capacity-based training, a smaller one drops tokens. Every bound is stated in the
report (`routing` notices).
"""

from __future__ import annotations

import math
from typing import Any

from dialects import nn
from monet_ir.frontend.attrs import node_name


def balanced_choices(shape: list[int], axis: int, k: int) -> Any:
    """The indices a TopK of `k` along `axis` returns under balanced routing: row r (every other
    axis, row-major) takes (r·k + j) mod n for its j-th choice, n the axis' size, so every index
    is taken equally often (to within one) and a row never takes one twice."""
    import numpy as np

    axis %= len(shape)
    n = shape[axis]
    moved = [d for i, d in enumerate(shape) if i != axis]
    rows = math.prod(moved)
    choices = (np.arange(rows, dtype=np.int64)[:, None] * k + np.arange(k, dtype=np.int64)[None, :]) % max(n, 1)
    return np.moveaxis(choices.reshape(moved + [k]), -1, axis)


class RoutingShadow:
    """The balanced-routing values of the integer and boolean tensors that follow from routing
    decisions and constants alone (see the module docstring), and the bounds they gave."""

    def __init__(self, capacity_factor: float) -> None:
        self.capacity_factor = capacity_factor
        self.values: dict[str, Any] = {}
        self.notes: list[str] = []

    def set_decisions(self, name: str, value: Any) -> None:
        self.values[name] = value

    def follow(self, imp: Any, node: Any) -> None:
        """After `node` was converted on data: its outputs' balanced values when its inputs are
        all constants or such values (and at least one is)."""
        from monet_ir.frontend.folding import NotFoldable, fold
        from monet_ir.frontend.attrs import attrs_of

        if not self.values or node.op_type in ("TopK", "NonZero"):
            return
        ins, shadowed = [], False
        for name in node.input:
            if not name:
                ins.append(None)
                continue
            if name in self.values:
                ins.append(self.values[name])
                shadowed = True
                continue
            t = imp.known(name)
            if t is None or t.const is None:
                return
            try:
                ins.append(imp.const_array(name))
            except Exception:  # an initializer without data
                return
        if not shadowed:
            return
        try:
            outs = fold(node.op_type, ins, attrs_of(node), node if node.domain in ("", "ai.onnx") else None, imp.opset)
        except NotFoldable:
            return
        for name, value in zip(node.output, outs, strict=False):
            if name:
                self.values[name] = value

    def bound(self, node: Any, mask: str, elements: int) -> int:
        """The static count of a NonZero of `mask` (`elements` in all)."""
        import numpy as np

        where = f"node '{node_name(node)}'"
        value = self.values.get(mask)
        if value is None:
            self.notes.append(f"{where}: NonZero of data that no routing decision determines: bounded by its "
                              f"input's {elements} elements (every element true)")
            return elements
        balanced = int(np.count_nonzero(value))
        bound = min(elements, max(1, math.ceil(self.capacity_factor * balanced - 1e-9)))
        self.notes.append(f"{where}: {balanced} of {elements} under balanced routing, capacity factor "
                          f"{self.capacity_factor:g}: bound {bound}")
        self.values[node.output[0]] = nn.NonZeroOp.coordinates(value, bound)
        return bound
