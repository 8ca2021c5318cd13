"""`-t monet-report`: a JSON summary of a training step's FLOPs, memory and ops.

    monet-opt step.mlir -t monet-report
    monet-opt model.onnx -p 'autodiff,insert-optimizer{kind=adam}' -t 'monet-report{per-op=true}'

The report describes the module's step function (its first `func.func`) as it is when the
emitter runs, i.e. after the passes of `-p`. Output is one JSON object, keys sorted, indented
by two spaces, ending with a newline; the same module always gives the same bytes.

Fields:

- `model`: the module's `monet.source` attribute (the ONNX file name the importer records),
  or null when the module has none.
- `flops`: `{phase: {"matmul_conv": int, "other": int}}` for the four phases `forward`,
  `backward`, `optimizer`, `recompute` (zeros when a phase has no op).
  `matmul_conv` is 2 x the multiply-accumulates of convolution and matrix-product ops and their
  gradients (PyTorch FlopCounterMode's convention: its forward and forward+backward totals are
  comparable to `forward` and `forward` + `backward` here). `other` is the arithmetic of all
  other ops (element-wise, normalization, pooling, reductions, losses, optimizer updates) by
  the cost model's per-element op counts, rounded per op. See `monet_ir.analysis.accounting`.
- `memory`: bytes by category (`monet_ir.analysis.accounting.memory_summary`):
  - `parameter_bytes`: trainable parameters (`monet.param` + `monet.trainable` arguments);
  - `buffer_bytes`: non-trainable parameters (batch-norm running statistics, frozen weights);
  - `gradient_bytes`: one gradient per trainable parameter that has one (`monet.grad` results
    or gradient operands of optimizer ops; 0 before `autodiff`);
  - `optimizer_state_bytes`: `monet.state` arguments (momentum buffers, Adam moments, steps);
  - `input_bytes`: `monet.input` arguments (the batch);
  - `saved_activation_bytes`: forward-computed values the backward pass reads
    (`monet_ir.analysis.saved`), each storage once;
  - `saved_input_bytes`, `saved_param_bytes`: inputs and parameters the backward pass reads
    (they alias `input_bytes` / `parameter_bytes`, no extra memory; PyTorch's split of
    `saved_for_backward` bytes).
- `ops`: `{phase: number of ops}` for the four phases (the `func.return` not counted).
- `per_op` (only with `per-op=true`): one row per op in program order, each
  `{"matmul_conv": int, "name": the op's node (ONNX node name, "" if none), "op": op name,
  "other": int, "phase": phase}`.
- after the `schedule` pass, the schedule's fields of `monet_ir.emit.step_report` (latency,
  energy and its breakdown, phases, cores, transfers, layers, `memory.peak_bytes` and
  `memory.capacity_bytes`), `precision` and `precision_source`: the same schema as
  `monet report`'s `report.json` (which adds `pipeline`).

Sizes count storage as an allocator sees it (`monet_ir.types.tensor_bytes`: a boolean is one
byte, a `tensor<f32>` four).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import IO, Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.utils.target import Target


def build_report(module: ModuleOp, per_op: bool = False) -> dict[str, Any]:
    """The report of a module as a dict (what the target prints as JSON)."""
    from monet_ir import graph
    from monet_ir.analysis import accounting

    fn = graph.step_function(module)
    source = module.attributes.get("monet.source")
    report: dict[str, Any] = {
        "model": source.data if isinstance(source, StringAttr) else None,
        "flops": accounting.flops_by_phase(fn),
        "memory": accounting.memory_summary(fn),
        "ops": accounting.op_counts_by_phase(fn),
    }
    if per_op:
        report["per_op"] = accounting.per_op_rows(fn)
    if "monet.latency_cycles" in module.attributes:
        part = scheduled_part(module)
        report["memory"].update(part.pop("memory"))
        report.update(part)
    return report


def scheduled_part(module: ModuleOp) -> dict[str, Any]:
    """After `schedule`: the schedule's fields (`monet_ir.emit.step_report`), recomputed from the
    target, mapping and precision the module records (the scheduler is deterministic)."""
    from monet_ir.emit.step_report import schedule_report
    from passes.schedule import resolved_options, run_schedule

    from monet_ir import graph
    from targets import get_target
    from targets.precision_choice import choose_precision

    target, mapping, precision = resolved_options(module, "", "", "")
    part = schedule_report(run_schedule(module, target, mapping, precision))
    choice = choose_precision(get_target(target, precision=precision or None), precision or None)
    part["precision"] = choice.name or graph.element_precision(graph.step_function(module))
    part["precision_source"] = choice.source
    return part


@dataclass(frozen=True)
class MonetReportTarget(Target):
    """JSON report of FLOPs, memory and op counts (fields in the module docstring)."""

    name = "monet-report"

    per_op: bool = False
    """Add one row per op (`per_op`)."""

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        json.dump(build_report(module, self.per_op), output, indent=2, sort_keys=True)
        output.write("\n")
