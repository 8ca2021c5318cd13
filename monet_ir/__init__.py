"""MONET: model the training of neural networks on heterogeneous dataflow accelerators.

Stable Python API (heavy dependencies load on first use):

- `import_onnx(path, *, dims=None, function_name="main", frozen=()) -> ModuleOp`
- `make_context() -> xdsl.context.Context` with every MONET dialect loaded
- `parse_module(text) -> ModuleOp` and `print_module(module) -> str`
- `build_step(model, **options) -> BuiltStep`: the training step `monet report` builds, from the
  same options (`StepOptions`: target, precision, checkpoint, fusion, ...; `monet_ir.pipeline`):
  `.module`, `.schedule` (with a target), `.resolved` (target and precision as chosen)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xdsl.context import Context
    from xdsl.dialects.builtin import ModuleOp

__all__ = ["import_onnx", "make_context", "parse_module", "print_module", "build_step", "StepOptions",
           "OnnxImportError"]


def import_onnx(source: Any, **kwargs: Any) -> ModuleOp:
    """Import an ONNX model as a verified MONET module; see `monet_ir.frontend.onnx_import`."""
    from monet_ir.frontend.onnx_import import import_onnx as _import

    return _import(source, **kwargs)


def build_step(model: str, **options: Any) -> Any:
    """The training step of `model` built with `options` (the fields of `StepOptions`, e.g.
    `target="edge_npu", checkpoint="sqrt"`), as `monet report` builds it."""
    from monet_ir.pipeline import StepOptions, build_step as _build

    return _build(StepOptions(model=model, **options))


def make_context() -> Context:
    from monet_ir.registry import make_context as _make

    return _make()


def parse_module(text: str, source_name: str = "<string>") -> ModuleOp:
    from xdsl.parser import Parser

    return Parser(make_context(), text, source_name).parse_module()


def print_module(module: ModuleOp, generic: bool = False) -> str:
    from io import StringIO

    from xdsl.printer import Printer

    out = StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(module)
    out.write("\n")
    return out.getvalue()


def __getattr__(name: str) -> Any:
    if name == "StepOptions":
        from monet_ir.options import StepOptions

        return StepOptions
    if name == "OnnxImportError":
        from monet_ir.frontend.onnx_import import OnnxImportError

        return OnnxImportError
    raise AttributeError(name)
