"""`monet-opt`: xDSL's opt driver with MONET's dialects, passes, emitters and an ONNX frontend.

    monet-opt model.onnx -p 'canonicalize' -o out.mlir
    monet-opt -f onnx --dim batch=32 < model.onnx
    monet-opt step.mlir --print-op-generic

All of xDSL's flags are kept (`-p`, `-o`, `-t`, `--split-input-file`, `--verify-diagnostics`,
`--print-op-generic`, ...). Import problems and pass errors print as one line per problem on
stderr with exit status 1, never as a traceback.
"""

from __future__ import annotations

import os

# one OpenBLAS thread unless the user chose otherwise (its idle threads spin on the other core);
# set before anything imports numpy
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import io  # noqa: E402
import sys  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import IO  # noqa: E402

import types  # noqa: E402
from contextlib import contextmanager  # noqa: E402


@contextmanager
def _package_metadata_deferred():
    """While xDSL's opt driver is imported, `importlib.metadata` is a stand-in whose attributes
    load the real module when first used. The driver imports it at module level only to print
    `--version`, and the real module pulls in email, zipfile and socket: ~22 ms of a ~220 ms
    start-up on the 2-core machine, for a flag almost no run passes. Afterwards the stand-in is
    withdrawn, so any later import gets the real module."""
    import importlib

    name = "importlib.metadata"
    if name in sys.modules:
        yield
        return

    def real() -> types.ModuleType:
        module = sys.modules.get(name)
        if module is None or module is stand_in:
            sys.modules.pop(name, None)
            module = importlib.import_module(name)
        return module

    def version(distribution: str) -> str:
        return real().version(distribution)

    def attribute(attr: str):
        if attr.startswith("__"):  # the import system probes e.g. `__path__`: not a reason to load
            raise AttributeError(attr)
        return getattr(real(), attr)

    stand_in = types.ModuleType(name)
    stand_in.version = version  # type: ignore[attr-defined]
    stand_in.__getattr__ = attribute  # type: ignore[attr-defined]
    sys.modules[name] = stand_in
    try:
        yield
    finally:
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]


with _package_metadata_deferred():
    from xdsl.dialects.builtin import ModuleOp  # noqa: E402
    from xdsl.xdsl_opt_main import xDSLOptMain  # noqa: E402

from monet_ir.options import parse_dims  # noqa: E402
from monet_ir.registry import all_dialects, all_passes  # noqa: E402


class _HeldOutput(io.StringIO):
    """`-o FILE`'s text, held until the run succeeds (xDSL closes the stream it is given)."""

    def close(self) -> None:
        pass


class MonetOptMain(xDSLOptMain):
    version_format = "monet-opt (xdsl {xdsl_version})"
    held_output: _HeldOutput | None = None

    def prepare_output(self) -> IO[str]:
        """`-o FILE`: its folder is checked writable before any work, and the file is written
        atomically once every chunk has been processed (`run`); a failure leaves the old file."""
        if self.args.output_file is None:
            return super().prepare_output()
        from monet_ir.files import check_writable

        check_writable(os.path.dirname(os.path.abspath(self.args.output_file)), "-o")
        self.held_output = _HeldOutput()
        return self.held_output

    def run(self) -> None:
        super().run()
        if self.held_output is not None:
            from monet_ir.files import write_atomic

            write_atomic(self.args.output_file, self.held_output.getvalue())

    def register_all_dialects(self) -> None:
        for name, factory in all_dialects().items():
            self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        for name, factory in all_passes().items():
            self.register_pass(name, factory)
        # the whole step as one pass: it builds its pipeline from the registry above, so it is
        # registered here, beside it, not in it
        self.register_pass("monet-step", _monet_step)

    def register_all_targets(self) -> None:
        # xDSL's own targets (mlir, llvm, ...) from its lazy table, as for dialects and passes:
        # xDSLOptMain's default gathers them through `Universe.get_multiverse()`, which reads the
        # entry points of every installed distribution to find xDSL plug-ins (17 ms of a 45 ms run
        # after the imports, on the 2-core machine)
        from xdsl.targets import get_all_targets

        from monet_ir.emit import get_all_emitters

        self.available_targets.update(get_all_targets())
        self.available_targets.update(get_all_emitters())

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        self.available_frontends["onnx"] = self.import_onnx_stream

    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        arg_parser.add_argument(
            "--dim",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="pin a symbolic ONNX dimension (e.g. --dim batch=32); repeatable",
        )
        arg_parser.add_argument(
            "--freeze",
            action="append",
            default=[],
            metavar="PARAM",
            help="import this ONNX parameter as non-trainable; repeatable",
        )

    def import_onnx_stream(self, stream: IO[bytes]) -> ModuleOp:
        from monet_ir.frontend.onnx_import import import_onnx

        return import_onnx(
            stream.read(),
            dims=parse_dims(self.args.dim),
            frozen=tuple(self.args.freeze),
            source_name=self.args.input_file or "<stdin>",
        )


def _monet_step() -> type:
    from passes.monet_step import MonetStepPass

    return MonetStepPass


def main(args: Sequence[str] | None = None) -> None:
    from monet_ir.errors import run_reporting_errors

    tools: list[MonetOptMain] = []

    def work() -> None:
        tools.append(MonetOptMain(description=__doc__.splitlines()[0], args=args))
        tools[0].run()

    def source() -> str:
        return (tools[0].args.input_file or "<stdin>") if tools else "input"

    sys.exit(run_reporting_errors("monet-opt", work, source))


if __name__ == "__main__":
    main()
