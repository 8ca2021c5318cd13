"""`monet-step`: the training step `monet report` builds, as one pass over an imported model.

    monet-opt model.onnx -p 'monet-step{target=edge_npu checkpoint=sqrt fusion=auto}' -t monet-report

Options: those of `monet report` that shape the step, by the same names (`StepOptions` in
`monet_ir.pipeline`, where each is declared once): `target`, `loss`, `labels`, `optimizer`,
`lr`, `precision` (a policy's text, e.g. `precision="weights=mxfp8_e4m3;mx-block=32"`),
`inference`, `checkpoint`, `fusion`, `tiles`, `mapping`, `offchip`, `mapper`, `mapper_objective`,
`grad_dataflow`. (`--dim` and `--freeze` are
`monet-opt`'s own import options; `-p` is this very pipeline.)

It runs the passes `monet_ir.pipeline.step_passes` lists, in its order (autodiff,
insert-optimizer, activation-checkpoint, quantize, fuse-layers, then annotate-cost and schedule
when a target is given), so `monet-opt` builds exactly the step `monet report` and
`monet explore` build. The module records `monet.step` (this pass with its options),
`monet.target` and `monet.precision`.
"""

from __future__ import annotations

from monet_ir.pipeline import step_pass_class

MonetStepPass = step_pass_class()
