"""Analyses of a training-step function (no IR changes except `mark_saved`'s attribute).

- `monet_ir.analysis.saved`: which forward values the backward pass reads (saved activations,
  inputs and parameters), their bytes, and the `monet.saved` marks.
- `monet_ir.analysis.accounting`: FLOPs per phase and per op, op counts, memory by category.
- `monet_ir.analysis.ir_signatures`: each op as the cost model's signature (`LoopNestSig` or
  `VectorSig`), the adapter between the IR and the IR-free cost model (`monet_ir.cost`).

Import the submodules directly; this package imports nothing eagerly.
"""
