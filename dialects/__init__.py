"""MONET dialects, registered lazily by name.

- `nn`: forward tensor ops (ONNX semantics, static shapes).
- `grad`: backward ops (autodiff, ONNX Runtime gradient ops).
- `train`: optimizer steps and in-place updates of persistent state.
- `hw`: cost and schedule attributes (`#hw.cost`, `#hw.sched`).
- `collective`: communication between chips (all-reduce, reduce-scatter, all-gather, send/recv).
- `mx`: casts into microscaling (MX) formats (quantize, requantize).
"""

from collections.abc import Callable

from xdsl.ir import Dialect, Operation


def _nn() -> Dialect:
    from dialects.nn import NN

    return NN


def _grad() -> Dialect:
    from dialects.grad import GRAD

    return GRAD


def _train() -> Dialect:
    from dialects.train import TRAIN

    return TRAIN


def _hw() -> Dialect:
    from dialects.hw import HW

    return HW


def _collective() -> Dialect:
    from dialects.collective import COLLECTIVE

    return COLLECTIVE


def _mx() -> Dialect:
    from dialects.mx import MX

    return MX


def get_all_dialects() -> dict[str, Callable[[], Dialect]]:
    """Our dialects by name, each behind a factory so that loading one is paid only when used."""
    return {"nn": _nn, "grad": _grad, "train": _train, "hw": _hw, "collective": _collective, "mx": _mx}


def op_class(name: str) -> type[Operation] | None:
    """The class of the op named `name` (`nn.conv`) among the op classes loaded (MONET's dialect
    of that prefix is loaded first; a plugin's ops are loaded with the plugin), or None."""
    from xdsl.irdl import IRDLOperation

    factory = get_all_dialects().get(name.partition(".")[0])
    if factory is not None:
        found = next((op for op in factory().operations if op.name == name), None)
        if found is not None:
            return found
    pending = list(IRDLOperation.__subclasses__())
    while pending:
        cls = pending.pop()
        if getattr(cls, "name", None) == name:
            return cls
        pending += cls.__subclasses__()
    return None
