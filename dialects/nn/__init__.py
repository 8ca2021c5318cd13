"""The `nn` dialect: tensor-level forward ops of a neural network.

The ops mirror ONNX semantics on statically shaped tensors. ONNX attributes and the values of
attribute-like inputs (a Reshape's shape, a Slice's starts, ...) become properties, printed in
the attribute dictionary; data inputs are operands. Shape-only ONNX ops (`Shape`, `Unsqueeze`,
`Flatten`, `Squeeze`, `Identity`, ...) are folded into `nn.reshape` or away at import.

A function is one training step: data inputs, parameters and persistent optimizer state are
function arguments with argument attributes (see `monet_ir.graph`), weights never enter the IR:

```mlir
func.func @main(%x: tensor<4x784xf32> {monet.input = "x"},
                %w: tensor<256x784xf32> {monet.param = "fc1.weight", monet.trainable},
                %b: tensor<256xf32> {monet.param = "fc1.bias", monet.trainable}) -> tensor<4x256xf32> {
  %h = nn.gemm %x, %w, %b {trans_b = true, node = "/fc1/Gemm"}
      : (tensor<4x784xf32>, tensor<256x784xf32>, tensor<256xf32>) -> tensor<4x256xf32>
  %r = nn.relu %h {node = "/Relu"} : tensor<4x256xf32>
  func.return %r : tensor<4x256xf32>
}
```

Every op carries optional `node` (ONNX node name) and `phase` properties (see
`dialects.base.MonetOp`); an `nn` op cloned for recomputation has `phase = "recompute"`.

The ops live in one module per family and are all importable from `dialects.nn`:
`elementwise` (activations, broadcasting arithmetic, `where`, `sum`, `cast`), `contractions`
(convolutions, `gemm`, `matmul`), `normalization`, `pooling` (pooling and reductions),
`data_movement` (views, transposes, concatenation, slicing, gathering, padding, dropout),
`constants` (`nn.constant`, `#nn.data`) and `losses`. A new op goes into its family's module and
into the `NN` list below.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from dialects.base import FUNCTIONAL, operands_format, raise_verify
from dialects.nn.elementwise import (
    AbsOp,
    AddOp,
    AndOp,
    CeilOp,
    CeluOp,
    CosOp,
    EluOp,
    FloorOp,
    MaxOp,
    MinOp,
    MishOp,
    ModOp,
    OrOp,
    PReluOp,
    RoundOp,
    SeluOp,
    SignOp,
    SinOp,
    SoftplusOp,
    SoftsignOp,
    XorOp,
    AxisUnaryOp,
    BinaryOp,
    CastOp,
    ClipOp,
    DivOp,
    EqualOp,
    ErfOp,
    ExpOp,
    GeluOp,
    HardSigmoidOp,
    HardSwishOp,
    LeakyReluOp,
    LogOp,
    LogSoftmaxOp,
    MulOp,
    NegOp,
    NotOp,
    PowOp,
    ReluOp,
    GreaterOp,
    LessOp,
    SigmoidOp,
    SoftmaxOp,
    SqrtOp,
    SubOp,
    SumOp,
    TanhOp,
    UnaryOp,
    WhereOp,
    raise_verify,
)
from dialects.nn.contractions import (
    ConvGeometry,
    ConvOp,
    ConvTransposeOp,
    GemmOp,
    MatMulOp,
)
from dialects.nn.normalization import (
    BatchNormOp,
    LayerNormOp,
)
from dialects.nn.pooling import (
    ArgMaxOp,
    ArgMinOp,
    ArgReduceOp,
    AvgPoolOp,
    GlobalAvgPoolOp,
    ReduceMaxOp,
    ReduceMinOp,
    MaxPoolOp,
    PoolOp,
    ReduceMeanOp,
    ReduceOp,
    ReduceSumOp,
    CumSumOp,
)
from dialects.nn.data_movement import (
    ConcatOp,
    DropoutOp,
    ExpandOp,
    GatherElementsOp,
    GatherNDOp,
    GatherOp,
    NonZeroOp,
    OneHotOp,
    PadOp,
    ReshapeOp,
    ResizeOp,
    ScatterElementsOp,
    ScatterNDOp,
    SliceOp,
    SplitOp,
    TileOp,
    TopKOp,
    TransposeOp,
)
from dialects.nn.constants import (
    CONSTANT_HEX_ABOVE,
    ConstantOp,
    RandomOp,
    TensorDataAttr,
    constant_data,
    tensor_storage_bytes,
)
from dialects.nn.losses import (
    MseLossOp,
    SoftmaxCrossEntropyOp,
)

NN = Dialect(
    "nn",
    [
        ReluOp, LeakyReluOp, ClipOp, SigmoidOp, HardSigmoidOp, HardSwishOp, TanhOp, ErfOp, GeluOp,
        SqrtOp, NegOp, ExpOp, LogOp, NotOp, SoftmaxOp, LogSoftmaxOp,
        SoftplusOp, SoftsignOp, AbsOp, SignOp, SinOp, CosOp, FloorOp, CeilOp, RoundOp, EluOp, CeluOp, SeluOp, MishOp,
        AddOp, SubOp, MulOp, DivOp, PowOp, EqualOp, LessOp, GreaterOp, AndOp, OrOp, XorOp, MaxOp, MinOp, ModOp,
        PReluOp, WhereOp, SumOp, CastOp,
        ConvOp, ConvTransposeOp, GemmOp, MatMulOp,
        BatchNormOp, LayerNormOp,
        MaxPoolOp, AvgPoolOp, GlobalAvgPoolOp,
        ReduceSumOp, ReduceMeanOp, ReduceMaxOp, ReduceMinOp, ArgMaxOp, ArgMinOp, CumSumOp,
        ReshapeOp, TransposeOp, ExpandOp, ConcatOp, SplitOp, SliceOp, GatherOp, GatherElementsOp, GatherNDOp, ScatterNDOp,
        ScatterElementsOp, TileOp, TopKOp, OneHotOp, NonZeroOp, PadOp, ResizeOp,
        DropoutOp, ConstantOp, RandomOp,
        SoftmaxCrossEntropyOp, MseLossOp,
    ],
    [TensorDataAttr],
)
