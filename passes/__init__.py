"""MONET passes by command-line name (kebab-case), each behind a lazy factory.

One file per pass: `passes/<snake_name>.py` holds `<Camel>Pass` with a docstring listing its
options; `tests/lit/passes/<snake_name>.mlir` tests it.
"""

from collections.abc import Callable

from xdsl.passes import ModulePass


def _autodiff() -> type[ModulePass]:
    from passes.autodiff import AutodiffPass

    return AutodiffPass


def _insert_optimizer() -> type[ModulePass]:
    from passes.insert_optimizer import InsertOptimizerPass

    return InsertOptimizerPass


def _annotate_cost() -> type[ModulePass]:
    from passes.annotate_cost import AnnotateCostPass

    return AnnotateCostPass


def _schedule() -> type[ModulePass]:
    from passes.schedule import SchedulePass

    return SchedulePass


def _activation_checkpoint() -> type[ModulePass]:
    from passes.activation_checkpoint import ActivationCheckpointPass

    return ActivationCheckpointPass


def _fuse_layers() -> type[ModulePass]:
    from passes.fuse_layers import FuseLayersPass

    return FuseLayersPass


def _quantize() -> type[ModulePass]:
    from passes.quantize import QuantizePass

    return QuantizePass


def _parallelize() -> type[ModulePass]:
    from passes.parallelize import ParallelizePass

    return ParallelizePass


def get_all_passes() -> dict[str, Callable[[], type[ModulePass]]]:
    return {
        "autodiff": _autodiff,
        "insert-optimizer": _insert_optimizer,
        "annotate-cost": _annotate_cost,
        "schedule": _schedule,
        "fuse-layers": _fuse_layers,
        "activation-checkpoint": _activation_checkpoint,
        "quantize": _quantize,
        "parallelize": _parallelize,
    }
