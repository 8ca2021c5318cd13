"""Running a MONET module on NumPy arrays: parameters from ONNX files, arguments by role name.

```python
from monet_ir import import_onnx
from monet_ir.interp.run import load_parameters, run_module

module = import_onnx("mlp_b4.onnx")
result = run_module(module, load_parameters("mlp_b4.onnx"), {"x": x}, keep_values=True)
result.outputs[0]                      # the logits
result.value("/fc1/Gemm_output_0")     # an intermediate, by ONNX tensor name (best effort)
result.state["fc1.weight"]             # parameters and optimizer state after the step
```

Function arguments are bound by the names of their role attributes (`monet.input`,
`monet.param`, `monet.state`; see `monet_ir.graph`). The semantics of the ops are those of
`monet_ir.interp.numpy_impl`.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import BlockArgument, SSAValue

from monet_ir import graph
from monet_ir.errors import MonetError
from monet_ir.interp.numpy_impl import RunResult, run_function
from monet_ir.types import numpy_dtype_of


class BindingError(MonetError, ValueError):
    """A value for the step's arguments is missing or does not fit; str() is one line."""


class MissingWeightsError(BindingError):
    """An ONNX initializer has no data (a weight-stripped file whose external data is absent)."""


def load_parameters(onnx_path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Every initializer of an ONNX file by name, as a NumPy array.

    External data is read from files next to the model. Raises `MissingWeightsError` (one line,
    naming the first initializer concerned) when initializers have no data, as in the
    weight-stripped files of `shared/models`.
    """
    import onnx
    from onnx import numpy_helper
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    path = os.fspath(onnx_path)
    model = onnx.load(path, load_external_data=False)
    base = os.path.dirname(os.path.abspath(path))
    params: dict[str, np.ndarray] = {}
    missing: list[tuple[str, str]] = []
    from monet_ir.frontend.onnx_checks import external_data_problem

    for init in model.graph.initializer:
        if uses_external_data(init):
            problem = external_data_problem(init, base)
            if problem:  # a location outside the model's folder is never read
                raise BindingError(f"{path}: initializer '{init.name}': {problem}")
            location = ExternalDataInfo(init).location
            if not os.path.isfile(os.path.join(base, location)):
                missing.append((init.name, location))
                continue
        try:
            params[init.name] = numpy_helper.to_array(init, base)
        except Exception as e:  # corrupt or truncated data
            raise MissingWeightsError(f"{path}: initializer '{init.name}' has no readable data ({e})") from None
    if missing:
        name, location = missing[0]
        more = f" (and {len(missing) - 1} more initializers)" if len(missing) > 1 else ""
        raise MissingWeightsError(
            f"{path}: initializer '{name}' has no data: its external data file '{location}' is missing, "
            f"the model is weight-stripped{more}"
        )
    return params


def bind_arguments(
    fn: func.FuncOp,
    params: Mapping[str, Any],
    inputs: Mapping[str, Any],
    *,
    state: Mapping[str, Any] | None = None,
) -> list[np.ndarray]:
    """One fresh array per argument of `fn`, looked up by the argument's role name.

    `monet.param` arguments come from `params`, `monet.input` ones from `inputs`, `monet.state`
    ones from `state`, else `params`, else zeros of the argument's type (fresh optimizer
    state). Values are copied and converted to the argument's dtype (same-kind casts only), so
    the caller's arrays are never updated in place. A missing value or a wrong shape raises a
    one-line ValueError naming the argument.
    """
    state = state or {}
    args: list[np.ndarray] = []
    for info, block_arg in zip(graph.arg_infos(fn), fn.body.block.args, strict=True):
        shape = tuple(block_arg.type.get_shape())  # type: ignore[attr-defined]
        dtype = np.dtype(numpy_dtype_of(block_arg.type.get_element_type()))  # type: ignore[attr-defined]
        label = _arg_label(info, block_arg)
        expected = f"(expected shape {list(shape)}, dtype {dtype})"
        if info.role == "param":
            value = params.get(info.name)
            if value is None:
                raise BindingError(f"{label} has no value: '{info.name}' is not among the parameters {expected}")
        elif info.role == "input":
            value = inputs.get(info.name)
            if value is None:
                raise BindingError(f"{label} has no value: '{info.name}' is not among the inputs {expected}")
        elif info.role == "state":
            value = state.get(info.name, params.get(info.name))
            if value is None:
                args.append(np.zeros(shape, dtype))
                continue
        else:
            raise BindingError(f"{label} has no monet.input/monet.param/monet.state role to bind it by")
        array = np.asarray(value)
        if array.shape != shape:
            raise BindingError(f"{label} has shape {list(shape)}, the value given has shape {list(array.shape)}")
        if not np.can_cast(array.dtype, dtype, casting="same_kind"):
            raise BindingError(f"{label} has element type {dtype}, the value given is {array.dtype}")
        args.append(np.array(array, dtype=dtype, copy=True))
    return args


def _arg_label(info: graph.ArgInfo, arg: BlockArgument) -> str:
    if info.role:
        return f"argument {info.index} '{info.name}' (monet.{info.role})"
    hint = f" %{arg.name_hint}" if arg.name_hint else ""
    return f"argument {info.index}{hint}"


@dataclass
class ModuleRunResult:
    """The result of `run_module`.

    - `outputs`: the function results, by position.
    - `state`: every `monet.param` and `monet.state` argument by name, after the run (optimizer
      ops update these arrays in place).
    - `values`: with `keep_values`, every SSA value's array (else None).
    - `values_by_name`: arrays by name: arguments by role name and by SSA name hint, op results
      by SSA name hint (the importer derives hints from ONNX tensor names). Without
      `keep_values` only arguments and outputs are there. A name carried by two different values
      is left out and listed in `ambiguous_names`.
    """

    outputs: list[np.ndarray]
    state: dict[str, np.ndarray]
    values_by_name: dict[str, np.ndarray]
    values: dict[SSAValue, np.ndarray] | None = None
    ambiguous_names: set[str] = field(default_factory=set)
    kept: dict[SSAValue, np.ndarray] = field(default_factory=dict)

    def value(self, onnx_name: str) -> np.ndarray:
        """The array of an ONNX tensor name, best effort.

        Tries the name itself, then the SSA name hint the importer derives from it
        (`onnx_import.ssa_name` with xDSL's `_<digits>` suffix removed). Hints are not unique:
        distinct ONNX names can map to one hint (`a_1`, `a_2`), and an op that imports as no op
        (Identity, a no-op Reshape) gives its input value the output's name. Raises KeyError
        when the name is unknown or ambiguous.
        """
        for key in (onnx_name, name_hint_of(onnx_name)):
            if key is None:
                continue
            if key in self.ambiguous_names:
                raise KeyError(f"'{onnx_name}': the name '{key}' is carried by several values")
            if key in self.values_by_name:
                return self.values_by_name[key]
        raise KeyError(f"no value named '{onnx_name}' (run with keep_values=True for intermediates)")


def name_hint_of(onnx_name: str) -> str | None:
    """The SSA name hint the ONNX importer gives the value of an ONNX tensor name."""
    from monet_ir.frontend.onnx_import import ssa_name

    hint = ssa_name(onnx_name)
    return None if hint is None else SSAValue.extract_valid_name(hint)


def run_module(
    module: ModuleOp,
    params: Mapping[str, Any],
    inputs: Mapping[str, Any],
    keep_values: bool = False,
    *,
    state: Mapping[str, Any] | None = None,
    keep: Collection[SSAValue] = (),
) -> ModuleRunResult:
    """Run the step function of `module` (its first func.func) on arguments bound by name;
    the arrays of the values in `keep` are returned in `kept`."""
    fn = graph.step_function(module)
    args = bind_arguments(fn, params, inputs, state=state)
    result: RunResult = run_function(fn, args, keep_values=keep_values, keep=keep)
    infos = graph.arg_infos(fn)
    persistent = {info.name: args[info.index] for info in infos if info.persistent}

    named: dict[str, SSAValue] = {}
    ambiguous: set[str] = set()
    arrays: dict[SSAValue, np.ndarray] = dict(zip(fn.body.block.args, args))

    def add(name: str | None, value: SSAValue) -> None:
        if not name or name in ambiguous:
            return
        if named.get(name, value) is not value:
            ambiguous.add(name)
            del named[name]
            return
        named[name] = value

    for info, block_arg in zip(infos, fn.body.block.args):
        add(info.name, block_arg)
        add(block_arg.name_hint, block_arg)
    if result.values is not None:
        arrays = result.values
        for value in arrays:
            if not isinstance(value, BlockArgument):
                add(value.name_hint, value)
    else:
        ret = fn.body.block.last_op
        if isinstance(ret, func.ReturnOp):
            for value, array in zip(ret.operands, result.outputs):
                arrays[value] = array
                add(value.name_hint, value)
    by_name = {name: arrays[value] for name, value in named.items()}
    return ModuleRunResult(result.outputs, persistent, by_name, result.values, ambiguous, result.kept)
