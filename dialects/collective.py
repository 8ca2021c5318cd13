"""The `collective` dialect: communication between the chips of a multi-chip system.

A multi-chip training step is one function that every chip of a group runs (SPMD); these ops
are where the chips exchange data. `group` names the process group (`dp`: data-parallel
replicas, `tp`: tensor-parallel shards, `pp`: pipeline neighbours), `size` its number of chips,
`algorithm` how the network carries it (`ring`, `tree`, `hierarchical`: ring inside a node,
ring across nodes; `direct` for send/recv). The ops are not pure (they synchronize chips), so
`dce` keeps them; their default phase is `backward` (gradient synchronization).

Shards are flat: a tensor of E elements split over `size` chips is a `tensor<ceil(E/size)>`.

```mlir
%g1r, %g2r = collective.all_reduce %g1, %g2 {group = "dp", size = 8 : i64, algorithm = "ring"}
    : tensor<768x768xf32>, tensor<768xf32> -> tensor<768x768xf32>, tensor<768xf32>
%s = collective.reduce_scatter %g1 {group = "dp", size = 8 : i64} : tensor<768x768xf32> -> tensor<73728xf32>
%w = collective.all_gather %s {group = "dp", size = 8 : i64, phase = "forward"} : tensor<73728xf32> -> tensor<768x768xf32>
%p = collective.shard %w {group = "dp", size = 8 : i64} : tensor<768x768xf32> -> tensor<73728xf32>
collective.send %x {group = "pp", size = 2 : i64, peer = 1 : i64, phase = "forward"} : tensor<1x1024x768xf32>
%y = collective.recv {group = "pp", size = 2 : i64, peer = 0 : i64, phase = "forward"} : tensor<1x1024x768xf32>
```

- `all_reduce`: every chip gets the element-wise sum over the group (variadic: one bucket).
- `reduce_scatter`: every chip gets its shard of the sum (variadic, per operand).
- `all_gather`: every chip gets the whole tensor from the shards (variadic, per operand).
- `shard`: this chip's shard of a tensor every chip holds: a local slice, no communication.
- `send` / `recv`: point-to-point to / from chip `peer` of the group (pipeline stages).
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import IntegerAttr, StringAttr, TensorType
from xdsl.ir import Dialect
from xdsl.irdl import (
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.traits import MemoryWriteEffect

from dialects.base import MonetOp, elem_of, expect, int_of, irdl_op_definition, num_elements, shape_of, str_of
from dialects.interfaces import CollectiveWork

ALGORITHMS = ("ring", "tree", "hierarchical", "direct")


def _elements(t) -> int:
    return num_elements(shape_of(t))


def _props(group: str, size: int, algorithm: str | None = None) -> dict:
    props = {"group": StringAttr(group), "size": IntegerAttr(size, 64)}
    if algorithm:
        props["algorithm"] = StringAttr(algorithm)
    return props


def shard_elements(elements: int, size: int) -> int:
    """Elements of one chip's shard of a tensor split over `size` chips."""
    return -(-elements // size)


class CollectiveOp(MonetOp):
    """Base of the collective ops: group, size, algorithm."""

    DEFAULT_PHASE: ClassVar[str] = "backward"
    DEFAULT_ALGORITHM: ClassVar[str] = "ring"
    NETWORK: ClassVar[str] = ""
    """How the op uses the network: `collective` (all chips of its group), `point-to-point`
    (send, receive), or "" (a local shard)."""
    group = prop_def(StringAttr)
    size = prop_def(IntegerAttr)
    algorithm = opt_prop_def(StringAttr)

    def group_size(self) -> int:
        return int_of(self.size)

    def get_algorithm(self) -> str:
        return str_of(self.algorithm, self.DEFAULT_ALGORITHM)

    def verify_semantics(self) -> None:
        expect(self.group_size() >= 1, self, f"size must be at least 1, got {self.group_size()}")
        expect(self.group.data != "", self, "group must not be empty")
        expect(self.get_algorithm() in ALGORITHMS, self,
               f"algorithm must be one of {', '.join(ALGORITHMS)}, got '{self.get_algorithm()}'")
        self.verify_collective()

    def verify_collective(self) -> None:
        pass

    def pairs(self):
        return zip(self.operands, self.results, strict=True)

    def check_counts(self) -> None:
        expect(len(self.operands) >= 1, self, "needs at least one operand")
        expect(len(self.operands) == len(self.results), self,
               f"{len(self.operands)} operands but {len(self.results)} results")


@irdl_op_definition
class AllReduceOp(CollectiveOp):
    """Sum over the group, every chip gets the whole result; one op = one bucket.

    `%a, %b = collective.all_reduce %x, %y {group = "dp", size = 8 : i64} : tensor<4x4xf32>, tensor<4xf32> -> tensor<4x4xf32>, tensor<4xf32>`
    """

    name = "collective.all_reduce"
    NETWORK: ClassVar[str] = "collective"
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    traits = traits_def(MemoryWriteEffect(), CollectiveWork(kind="elementwise", reduces=True))
    assembly_format = "$inputs attr-dict `:` type($inputs) `->` type($outputs)"

    def __init__(self, inputs, group: str, size: int, algorithm: str | None = None):
        super().__init__(operands=[list(inputs)], result_types=[[v.type for v in inputs]],
                         properties=_props(group, size, algorithm))

    def verify_collective(self) -> None:
        self.check_counts()
        for i, (x, r) in enumerate(self.pairs()):
            expect(x.type == r.type, self, f"result {i} has type {r.type}, expected {x.type}")


@irdl_op_definition
class ReduceScatterOp(CollectiveOp):
    """Sum over the group, every chip keeps its flat shard of each operand.

    `%s = collective.reduce_scatter %g {group = "dp", size = 8 : i64} : tensor<64x8xf32> -> tensor<64xf32>`
    """

    name = "collective.reduce_scatter"
    NETWORK: ClassVar[str] = "collective"
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    traits = traits_def(MemoryWriteEffect(), CollectiveWork(kind="elementwise", reduces=True))
    assembly_format = "$inputs attr-dict `:` type($inputs) `->` type($outputs)"

    def __init__(self, inputs, group: str, size: int, algorithm: str | None = None):
        types = [TensorType(elem_of(v.type), [shard_elements(_elements(v.type), size)]) for v in inputs]
        super().__init__(operands=[list(inputs)], result_types=[types], properties=_props(group, size, algorithm))

    def verify_collective(self) -> None:
        self.check_counts()
        for i, (x, r) in enumerate(self.pairs()):
            want = shard_elements(_elements(x.type), self.group_size())
            expect(shape_of(r.type) == (want,), self,
                   f"result {i} has shape {list(shape_of(r.type))}, expected [{want}] (the flat shard of "
                   f"{_elements(x.type)} elements over {self.group_size()} chips)")
            expect(elem_of(x.type) == elem_of(r.type), self, f"result {i} changes the element type")


@irdl_op_definition
class AllGatherOp(CollectiveOp):
    """Every chip gets the whole tensor from the shards of the group: flat shards, or with
    `axis`, shards along that axis (tensor parallelism: each chip holds 1/size of the axis).

    `%w = collective.all_gather %s {group = "dp", size = 8 : i64} : tensor<64xf32> -> tensor<64x8xf32>`
    `%x = collective.all_gather %s {group = "tp", size = 4 : i64, axis = 2 : i64} : tensor<1x8x16xf32> -> tensor<1x8x64xf32>`
    """

    name = "collective.all_gather"
    NETWORK: ClassVar[str] = "collective"
    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    axis = opt_prop_def(IntegerAttr)
    traits = traits_def(MemoryWriteEffect(), CollectiveWork())
    assembly_format = "$inputs attr-dict `:` type($inputs) `->` type($outputs)"

    def __init__(self, inputs, result_types, group: str, size: int, algorithm: str | None = None,
                 axis: int | None = None):
        props = _props(group, size, algorithm)
        if axis is not None:
            props["axis"] = IntegerAttr(axis, 64)
        super().__init__(operands=[list(inputs)], result_types=[list(result_types)], properties=props)

    def verify_collective(self) -> None:
        self.check_counts()
        for i, (x, r) in enumerate(self.pairs()):
            _check_shard(self, f"operand {i}", x.type, r.type, self.axis)
            expect(elem_of(x.type) == elem_of(r.type), self, f"result {i} changes the element type")


def _check_shard(op, what: str, shard, whole, axis) -> None:
    """`shard` is one chip's flat shard of `whole`, or with `axis`, its 1/size along the axis."""
    n = op.group_size()
    if axis is None:
        want = shard_elements(_elements(whole), n)
        expect(shape_of(shard) == (want,), op,
               f"{what} has shape {list(shape_of(shard))}, expected [{want}] (the flat shard of "
               f"{_elements(whole)} elements over {n} chips)")
        return
    full = list(shape_of(whole))
    a = int_of(axis)
    expect(0 <= a < len(full), op, f"axis {a} is not an axis of {whole}")
    expect(full[a] % n == 0, op, f"size {n} does not divide axis {a} of {whole}")
    full[a] //= n
    expect(list(shape_of(shard)) == full, op,
           f"{what} has shape {list(shape_of(shard))}, expected {full} (1/{n} of axis {a})")


@irdl_op_definition
class ShardOp(CollectiveOp):
    """This chip's shard of a tensor every chip of the group holds (no communication): flat,
    or with `axis`, its 1/size along that axis.

    `%p = collective.shard %w {group = "dp", size = 8 : i64} : tensor<64x8xf32> -> tensor<64xf32>`
    `%q = collective.shard %w {group = "tp", size = 2 : i64, axis = 0 : i64} : tensor<64x8xf32> -> tensor<32x8xf32>`
    """

    name = "collective.shard"
    NETWORK: ClassVar[str] = ""
    traits = traits_def(CollectiveWork())
    DEFAULT_PHASE: ClassVar[str] = "optimizer"
    input = operand_def(TensorType)
    output = result_def(TensorType)
    axis = opt_prop_def(IntegerAttr)
    assembly_format = "$input attr-dict `:` type($input) `->` type($output)"

    def __init__(self, value, group: str, size: int, axis: int | None = None):
        props = _props(group, size)
        if axis is None:
            t = TensorType(elem_of(value.type), [shard_elements(_elements(value.type), size)])
        else:
            shape = list(shape_of(value.type))
            shape[axis] //= size
            t = TensorType(elem_of(value.type), shape)
            props["axis"] = IntegerAttr(axis, 64)
        super().__init__(operands=[value], result_types=[t], properties=props)

    def verify_collective(self) -> None:
        _check_shard(self, "result", self.output.type, self.input.type, self.axis)


@irdl_op_definition
class SendOp(CollectiveOp):
    """Send a tensor to chip `peer` of the group.

    `collective.send %x {group = "pp", size = 2 : i64, peer = 1 : i64} : tensor<4x8xf32>`
    """

    name = "collective.send"
    NETWORK: ClassVar[str] = "point-to-point"
    DEFAULT_ALGORITHM: ClassVar[str] = "direct"
    input = operand_def(TensorType)
    peer = prop_def(IntegerAttr)
    traits = traits_def(MemoryWriteEffect(), CollectiveWork())
    assembly_format = "$input attr-dict `:` type($input)"

    def verify_collective(self) -> None:
        peer = int_of(self.peer)
        expect(0 <= peer < self.group_size(), self, f"peer {peer} is not a chip of a group of {self.group_size()}")


@irdl_op_definition
class RecvOp(CollectiveOp):
    """Receive a tensor from chip `peer` of the group.

    `%y = collective.recv {group = "pp", size = 2 : i64, peer = 0 : i64} : tensor<4x8xf32>`
    """

    name = "collective.recv"
    NETWORK: ClassVar[str] = "point-to-point"
    DEFAULT_ALGORITHM: ClassVar[str] = "direct"
    output = result_def(TensorType)
    peer = prop_def(IntegerAttr)
    traits = traits_def(MemoryWriteEffect(), CollectiveWork())
    assembly_format = "attr-dict `:` type($output)"

    def verify_collective(self) -> None:
        peer = int_of(self.peer)
        expect(0 <= peer < self.group_size(), self, f"peer {peer} is not a chip of a group of {self.group_size()}")


COLLECTIVE = Dialect("collective", [AllReduceOp, ReduceScatterOp, AllGatherOp, ShardOp, SendOp, RecvOp], [])
