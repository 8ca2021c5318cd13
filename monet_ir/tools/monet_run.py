"""`monet-run`: execute a training step on numpy, the reference semantics of the MONET dialects.

    monet-run MODEL.onnx|STEP.mlir [-p PIPELINE] [--params P.npz] [--inputs I.npz] --out OUT.npz
              [--all-values] [--dim NAME=N] [--precision POLICY [--mx-block K] [--mx-group G]]

The pipeline (default `autodiff` for an ONNX model, none for IR) runs in process on the module.
Parameters default to the ONNX initializers; `--params` adds or overrides them (and optimizer
state by `monet.state` name). `--inputs` gives the data inputs by name (`x`, `labels`, ...).

OUT.npz holds `loss` (the first result), `grad/<param>` for every gradient result or gradient an
optimizer op consumes (with `insert-optimizer` in the pipeline), the updated
`<param>` and `<state>` arrays when the step has optimizer ops, and with `--all-values` every
ONNX tensor's value `value/<onnx name>` and gradient `grad/<onnx name>` (ONNX inputs only).

`--precision` (a format name or `weights=F,activations=F,gradients=F`, as `monet report`) runs
the `quantize` pass after the pipeline: the step computes with MX-quantized operands
(quantize-dequantize in numpy), so OUT.npz holds the loss and gradients of an MX training step;
plain formats change nothing (numpy computes in the model's element type).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from monet_ir.errors import UsageError, run_reporting_errors
from monet_ir.untrusted import short_repr


def build_parser() -> argparse.ArgumentParser:
    from monet_ir.options import ArgumentParser

    parser = ArgumentParser(prog="monet-run", description=__doc__.splitlines()[0])
    parser.add_argument("model", help="an ONNX model or a MONET IR (.mlir) file")
    parser.add_argument("-p", "--passes", default=None, help="pass pipeline (default for ONNX: autodiff)")
    parser.add_argument("--params", help="npz of parameters (and optimizer state) by name")
    parser.add_argument("--inputs", help="npz of data inputs by name")
    parser.add_argument("--out", required=True, help="npz to write")
    parser.add_argument("--all-values", action="store_true", help="also write every ONNX tensor's value and gradient")
    parser.add_argument("--dim", action="append", default=[], metavar="NAME=N", help="pin a symbolic ONNX dimension")
    parser.add_argument("--precision", metavar="NAME|CLASS=NAME,...",
                        help="run the step with MX-quantized contraction operands (the quantize pass)")
    parser.add_argument("--mx-block", type=int, default=32, metavar="K", help="elements per vector group (default 32)")
    parser.add_argument("--mx-group", default="vector", metavar="vector|square:RxC", help="MX group shape")
    return parser


def expected_arrays(fn: Any, roles: Sequence[str]) -> dict[str, tuple[tuple[int, ...], Any]]:
    """The step's arguments of these roles by name: (shape, numpy dtype)."""
    import numpy as np

    from monet_ir.graph import arg_infos
    from monet_ir.types import numpy_dtype_of

    expected = {}
    for info, arg in zip(arg_infos(fn), fn.body.block.args, strict=True):
        if info.role in roles and info.name:
            expected[info.name] = (tuple(arg.type.get_shape()), np.dtype(numpy_dtype_of(arg.type.get_element_type())))
    return expected


MAX_NPZ_MEMBERS = 1_000_000


def load_npz(path: str | None, what: str,
             expected: dict[str, tuple[tuple[int, ...], Any]] | None = None) -> dict[str, Any]:
    """The arrays of an .npz file by name, read only after every member has been looked at
    without reading its data: each must be an `.npy` array named once, of a plain dtype (no
    Python objects), whose header's shape and dtype account for exactly the member's declared
    size and, when `expected` (name -> (shape, dtype)) is given, name one of them with its shape
    and a dtype that casts to it. So a zip bomb (a small file declaring gigabytes) or a stray
    array costs nothing: one line, before any array is read."""
    if path is None:
        return {}
    import zipfile

    import numpy as np

    def refuse(problem: str) -> UsageError:
        return UsageError(f"{what} {path}: {problem}")

    try:
        archive = zipfile.ZipFile(path)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:  # missing, empty or not an npz file
        raise refuse(f"cannot read npz ({type(e).__name__}: {e})") from None
    arrays: dict[str, Any] = {}
    with archive:
        members = archive.infolist()
        if len(members) > MAX_NPZ_MEMBERS:
            raise refuse(f"{len(members):,} members, more than an npz of a step's arrays may have")
        shapes: dict[str, tuple[tuple[int, ...], Any]] = {}
        try:
            for info in members:
                name = info.filename
                if info.is_dir() or not name.endswith(".npy"):
                    raise refuse(f"member {short_repr(name)} is not an .npy array")
                key = name[:-len(".npy")]
                if key in shapes:
                    raise refuse(f"array {short_repr(key)} is there twice")
                if expected is not None and key not in expected:
                    raise refuse(f"array {short_repr(key)} names nothing the step takes (it takes "
                                 f"{short_repr(sorted(expected), 200)})")
                if info.flag_bits & 0x1:
                    raise refuse(f"array {short_repr(key)} is encrypted")
                with archive.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                   else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read_header(member)
                    header_bytes = member.tell()
                if dtype.hasobject:
                    raise refuse(f"array {short_repr(key)} holds Python objects (dtype {dtype}), not numbers")
                data_bytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
                if header_bytes + data_bytes != info.file_size:
                    raise refuse(f"array {short_repr(key)} declares shape {list(shape)} of {dtype} ({data_bytes:,} bytes) "
                                 f"in a member of {info.file_size:,} bytes")
                if expected is not None:
                    want_shape, want_dtype = expected[key]
                    if tuple(shape) != want_shape or not np.can_cast(dtype, want_dtype, casting="same_kind"):
                        raise refuse(f"array {short_repr(key)} has shape {list(shape)} of {dtype}; the step's "
                                     f"'{key}' is {list(want_shape)} of {want_dtype}")
                shapes[key] = (tuple(shape), dtype)
            for info in members:
                with archive.open(info) as member:
                    arrays[info.filename[:-len(".npy")]] = np.lib.format.read_array(member, allow_pickle=False)
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError) as e:
            raise refuse(f"cannot read npz ({type(e).__name__}: {e})") from None
    return arrays


def run(args: argparse.Namespace) -> None:
    import numpy as np

    from monet_ir import parse_module
    from monet_ir.frontend.onnx_import import import_onnx
    from monet_ir.graph import step_function
    from monet_ir.interp.run import load_parameters, run_module
    from monet_ir.options import parse_dims

    from pathlib import Path

    from monet_ir.files import check_writable

    out_path = args.out if args.out.endswith(".npz") else args.out + ".npz"
    check_writable(Path(out_path).parent, "--out")  # before any work
    names: dict = {}
    is_onnx = args.model.endswith(".onnx")
    if is_onnx:
        module = import_onnx(args.model, dims=parse_dims(args.dim), value_names=names)
        params = load_parameters(args.model)
    else:
        try:
            with open(args.model) as f:
                module = parse_module(f.read(), args.model)
        except OSError as e:
            raise UsageError(f"{args.model}: cannot read file: {e.strerror}") from None
        params = {}
    policy = None
    if args.precision:
        from monet_ir.precision import parse_precision

        policy = parse_precision(args.precision, args.mx_block, args.mx_group)  # bad text fails before the run
    grads = apply_pipeline(module, args.passes if args.passes is not None else ("autodiff" if is_onnx else ""))
    if policy is not None and policy.has_mx:
        from xdsl.context import Context

        from passes.quantize import QuantizePass

        QuantizePass(policy=policy.spec()).apply(Context(), module)
    module.verify()
    fn = step_function(module)
    # the step's arguments are known: an npz is checked against them before any array is read
    params.update(load_npz(args.params, "--params", expected_arrays(fn, ("param", "state"))))
    inputs = load_npz(args.inputs, "--inputs", expected_arrays(fn, ("input",)))
    consumed = optimizer_gradients(fn)
    from monet_ir.interp.run import BindingError

    try:
        result = run_module(module, params, inputs, keep_values=args.all_values, keep=list(consumed.values()))
    except BindingError as e:
        raise type(e)(f"{e}{_flag_hint(str(e), args)}") from None

    out: dict[str, Any] = {}
    res_attrs = fn.res_attrs.data if fn.res_attrs is not None else ()
    for i, array in enumerate(result.outputs):
        attrs = res_attrs[i].data if i < len(res_attrs) else {}
        if "monet.loss" in attrs or (i == 0 and "monet.grad" not in attrs):
            out["loss"] = array
        elif "monet.grad" in attrs:
            out[f"grad/{attrs['monet.grad'].data}"] = array
        else:
            out[f"output/{i}"] = array
    for param, gradient in consumed.items():
        if gradient in result.kept:
            out.setdefault(f"grad/{param}", result.kept[gradient])
    if any(op.name.startswith("train.") for op in fn.walk()):
        out.update(result.state)
    if args.all_values and result.values is not None:
        for onnx_name, value in names.items():
            if value in result.values:
                out[f"value/{onnx_name}"] = result.values[value]
            g = grads.get(value)
            if g is not None and g in result.values:
                out[f"grad/{onnx_name}"] = result.values[g]
    from monet_ir.files import atomic_file

    with atomic_file(out_path) as f:  # (numpy's savez appends .npz to a name without it; so do we)
        np.savez(f, **out)
    print(f"monet-run: wrote {len(out)} arrays to {out_path}" + (f" (loss {float(out['loss']):.6g})" if "loss" in out else ""))


def optimizer_gradients(fn: Any) -> dict[str, Any]:
    """The gradient each optimizer op consumes, by parameter name: after `insert-optimizer` the
    gradients are no longer results of the step, but OUT.npz still holds them."""
    from xdsl.ir import BlockArgument

    from monet_ir.graph import arg_infos

    names = {i.index: i.name for i in arg_infos(fn)}
    found = {}
    for op in fn.walk():
        if op.name.startswith("train.") and hasattr(op, "grad") and isinstance(op.param, BlockArgument):
            found[names.get(op.param.index, f"arg{op.param.index}")] = op.grad
    return found


def apply_pipeline(module: Any, spec: str) -> dict:
    """Run the passes of `spec`; returns autodiff's value → gradient map (empty without it)."""
    from xdsl.passes import PassPipeline

    from monet_ir.registry import all_passes, make_context
    from passes.autodiff import AutodiffPass

    grads: dict = {}
    if not spec:
        return grads
    ctx = make_context()
    pipeline = PassPipeline.parse_spec(all_passes(), spec)
    for p in pipeline.passes:
        if isinstance(p, AutodiffPass):
            grads = p.differentiate(module)
        else:
            p.apply(ctx, module)
        module.verify()
    return grads


def main(argv: Sequence[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    sys.exit(run_reporting_errors("monet-run", lambda: run(args), args.model))


def _flag_hint(message: str, args: Any) -> str:
    """Which option gives the value a binding error misses: the data inputs come from --inputs,
    parameters and optimizer state from --params."""
    for words, flag, given, what in (("among the inputs", "--inputs", args.inputs, "the data inputs"),
                                     ("among the parameters", "--params", args.params, "parameters")):
        if words in message:
            where = f"{given} has no array of that name" if given else f"no {flag} was given"
            return f"; give {what} by name in an npz file with {flag} FILE.npz ({where})"
    return ""


if __name__ == "__main__":
    main()

