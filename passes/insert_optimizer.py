"""`insert-optimizer`: turn the parameter gradients of a training step into optimizer updates.

After `autodiff` the step function returns the loss (`{monet.loss}`) and one gradient per
trainable parameter (`{monet.grad = "<param>"}`). This pass, for each such gradient:

1. finds the `monet.param` argument of that name (it must be `monet.trainable` and have the
   gradient's type);
2. appends the optimizer's persistent state as new function arguments, typed like the
   parameter (PyTorch's `zeros_like(p)`), except the Adam step counter which is a `tensor<f32>`
   (PyTorch keeps a 4-byte float step):

   | kind | state arguments |
   |---|---|
   | `sgd` | none |
   | `momentum` | `{monet.state = "<param>.momentum_buffer"}` |
   | `adam`, `adamw` | `{monet.state = "<param>.exp_avg"}`, `"<param>.exp_avg_sq"`, `"<param>.step"` |

3. inserts one `train.*` op updating the parameter in place, just before the `func.return`,
   with `node = "<param>"`;
4. removes the gradient from the function's results (the `func.return` operands, the function
   type and `res_attrs`).

The `train` ops have no results and write memory, so the gradients now feed side-effecting
ops and survive `dce` and `canonicalize`.

Options (`-p 'insert-optimizer{kind=adamw lr=0.0005 weight-decay=0.1}'`; separate options with
spaces; float options accept integer literals, and exponents need a decimal point: `eps=1.0e-6`,
not `eps=1e-6`):

- `kind`: `sgd` | `momentum` | `adam` | `adamw` (default `adam`). `momentum` is PyTorch's
  `SGD(momentum=...)` with dampening 0; `adam` and `adamw` are `torch.optim.Adam` / `AdamW`.
- `lr`: learning rate (default 0.001, PyTorch's default for every kind).
- `momentum`: momentum factor of `kind=momentum` (default 0.9).
- `nesterov`: Nesterov momentum (default false); only with `kind=momentum` and momentum > 0.
- `beta1`, `beta2`, `eps`: Adam/AdamW coefficients (defaults 0.9, 0.999, 1e-8).
- `weight-decay`: weight decay; the default -1 means "PyTorch's default for the kind": 0.01 for
  `adamw`, 0 for the others. Any other negative value is an error. `sgd`, `momentum` and
  `adam` add it to the gradient (L2); `adamw` decays the parameter (decoupled). The
  `weight_decay` property is written on the op when non-zero, and always for `adamw`.

Options that do not apply to the chosen kind are ignored (except `nesterov`, an error).
Every hyper-parameter the kind uses is written on the op explicitly.

Idempotence: a function that has no `monet.grad` result is left unchanged, and so is one whose
gradients all belong to parameters that already have an optimizer op. A function where some
parameters with a `monet.grad` result have an optimizer op and others do not is rejected
(PassFailedException): the pass does not complete half-optimized steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from xdsl.context import Context
from xdsl.dialects import func
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FunctionType,
    ModuleOp,
    StringAttr,
    TensorType,
    f32,
)
from xdsl.ir import Attribute, BlockArgument, SSAValue
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import PassFailedException

from dialects import train
from dialects.base import bool_attr, float_attr
from monet_ir import graph

GRAD_ATTR = "monet.grad"

# state-argument suffixes per kind, in operand order
STATE_SUFFIXES: dict[str, tuple[str, ...]] = {
    "sgd": (),
    "momentum": ("momentum_buffer",),
    "adam": ("exp_avg", "exp_avg_sq", "step"),
    "adamw": ("exp_avg", "exp_avg_sq", "step"),
}

# PyTorch's default weight decay per kind (used when the option is -1)
DEFAULT_WEIGHT_DECAY: dict[str, float] = {"sgd": 0.0, "momentum": 0.0, "adam": 0.0, "adamw": 0.01}


@dataclass(frozen=True)
class InsertOptimizerPass(ModulePass):
    """Replace `monet.grad` results by in-place `train.*` updates with persistent state
    (see the module docstring for the options)."""

    name = "insert-optimizer"

    kind: Literal["sgd", "momentum", "adam", "adamw"] = "adam"
    """Optimizer: sgd | momentum | adam | adamw."""
    lr: float | int = 1e-3
    """Learning rate."""
    momentum: float | int = 0.9
    """Momentum factor (kind=momentum)."""
    nesterov: bool = False
    """Nesterov momentum (kind=momentum only)."""
    beta1: float | int = 0.9
    """Adam first-moment coefficient."""
    beta2: float | int = 0.999
    """Adam second-moment coefficient."""
    eps: float | int = 1e-8
    """Adam denominator epsilon."""
    weight_decay: float | int = -1
    """Weight decay; -1 = PyTorch's default for the kind (0.01 for adamw, else 0)."""

    def resolved_weight_decay(self) -> float:
        if self.weight_decay == -1:
            return DEFAULT_WEIGHT_DECAY[self.kind]
        return float(self.weight_decay)

    def check_options(self) -> None:
        problems = []
        if self.kind not in STATE_SUFFIXES:
            problems.append(f"kind must be one of {', '.join(STATE_SUFFIXES)}, got '{self.kind}'")
        if not self.lr >= 0:
            problems.append(f"lr must be non-negative, got {self.lr}")
        if self.weight_decay != -1 and not self.weight_decay >= 0:
            problems.append(f"weight-decay must be non-negative (or -1 for the kind's default), got {self.weight_decay}")
        if self.kind == "momentum" and not self.momentum >= 0:
            problems.append(f"momentum must be non-negative, got {self.momentum}")
        if self.nesterov and self.kind != "momentum":
            problems.append(f"nesterov applies to kind=momentum only, not kind={self.kind}")
        if self.nesterov and self.kind == "momentum" and not self.momentum > 0:
            problems.append("nesterov needs a positive momentum")
        if self.kind in ("adam", "adamw"):
            for what, beta in (("beta1", self.beta1), ("beta2", self.beta2)):
                if not 0.0 <= beta < 1.0:
                    problems.append(f"{what} must be in [0, 1), got {beta}")
            if not self.eps >= 0:
                problems.append(f"eps must be non-negative, got {self.eps}")
        if problems:
            raise PassFailedException(f"{self.name}: " + "; ".join(problems))

    def properties(self) -> dict[str, Attribute]:
        """The hyper-parameter properties of the train op (node added per parameter)."""
        props: dict[str, Attribute] = {"lr": float_attr(self.lr)}
        wd = self.resolved_weight_decay()
        if self.kind == "momentum":
            props["momentum"] = float_attr(self.momentum)
            if self.nesterov:
                props["nesterov"] = bool_attr(True)
        elif self.kind in ("adam", "adamw"):
            props["beta1"] = float_attr(self.beta1)
            props["beta2"] = float_attr(self.beta2)
            props["eps"] = float_attr(self.eps)
        if wd != 0.0 or self.kind == "adamw":
            props["weight_decay"] = float_attr(wd)
        return props

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        self.check_options()
        try:
            fn = graph.step_function(op)
        except ValueError:
            return
        insert_optimizer(fn, self)


@dataclass(frozen=True)
class _Gradient:
    result_index: int
    value: SSAValue
    param: BlockArgument
    name: str


OP_CLASS: dict[str, type[train.OptimizerOp]] = {
    "sgd": train.SgdOp,
    "momentum": train.MomentumOp,
    "adam": train.AdamOp,
    "adamw": train.AdamWOp,
}


def gradient_results(fn: func.FuncOp) -> list[tuple[int, str]]:
    """(result index, parameter name) of every result carrying `monet.grad`."""
    if fn.res_attrs is None:
        return []
    found = []
    for i, attrs in enumerate(fn.res_attrs.data):
        name = attrs.data.get(GRAD_ATTR)
        if name is not None:
            if not isinstance(name, StringAttr):
                raise PassFailedException(f"insert-optimizer: result {i}: monet.grad must be a string, got {name}")
            found.append((i, name.data))
    return found


def optimized_params(fn: func.FuncOp) -> set[str]:
    """Names of the `monet.param` arguments some optimizer op already updates."""
    infos = graph.arg_infos(fn)
    names = set()
    for op in fn.walk():
        if isinstance(op, train.OptimizerOp):
            p = op.operands[0]
            if isinstance(p, BlockArgument) and p.block is fn.body.block and infos[p.index].role == "param":
                names.add(infos[p.index].name)
    return names


def insert_optimizer(fn: func.FuncOp, options: InsertOptimizerPass) -> None:
    """Rewrite one step function in place (see the module docstring)."""
    found = gradient_results(fn)
    if not found:
        return
    names = [name for _, name in found]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise PassFailedException(
            f"insert-optimizer: several results carry monet.grad for {', '.join(repr(n) for n in duplicates)}")
    already = optimized_params(fn)
    if already:
        missing = [n for n in names if n not in already]
        if not missing:
            return  # every gradient already has its optimizer op: nothing to do
        raise PassFailedException(
            f"insert-optimizer: the step is partly optimized: {len(already)} parameter(s) already have an "
            f"optimizer op (e.g. '{sorted(already)[0]}') but the gradients of {len(missing)} do not "
            f"(e.g. '{missing[0]}'); run insert-optimizer on the step before adding optimizer ops by hand")

    block = fn.body.block
    ret = fn.get_return_op()
    if ret is None:
        raise PassFailedException(f"insert-optimizer: @{fn.sym_name.data} has no func.return")
    infos = graph.arg_infos(fn)
    params = {info.name: block.args[info.index] for info in infos if info.role == "param"}
    existing_state = {info.name for info in infos if info.role == "state"}

    grads: list[_Gradient] = []
    for index, name in found:
        param = params.get(name)
        if param is None:
            raise PassFailedException(
                f"insert-optimizer: result {index} is the gradient of '{name}', but no monet.param argument has that name")
        if not infos[param.index].trainable:
            raise PassFailedException(
                f"insert-optimizer: result {index} is the gradient of '{name}', which is not monet.trainable")
        value = ret.operands[index]
        if value.type != param.type:
            raise PassFailedException(
                f"insert-optimizer: the gradient of '{name}' has type {value.type}, the parameter {param.type}")
        clash = [f"{name}.{s}" for s in STATE_SUFFIXES[options.kind] if f"{name}.{s}" in existing_state]
        if clash:
            raise PassFailedException(f"insert-optimizer: a monet.state argument '{clash[0]}' already exists")
        grads.append(_Gradient(index, value, param, name))

    # persistent state arguments, appended after the existing ones
    arg_attrs = list(fn.arg_attrs.data) if fn.arg_attrs is not None else []
    arg_attrs += [DictionaryAttr({})] * (len(block.args) - len(arg_attrs))
    suffixes = STATE_SUFFIXES[options.kind]
    args = iter(graph.append_args(block, [TensorType(f32, []) if suffix == "step" else g.param.type
                                          for g in grads for suffix in suffixes]))
    state_of: dict[str, list[BlockArgument]] = {}
    for g in grads:
        state_of[g.name] = []
        for suffix in suffixes:
            arg = next(args)
            arg.name_hint = _state_hint(g.param, g.name, suffix)
            arg_attrs.append(graph.arg_attrs("state", f"{g.name}.{suffix}"))
            state_of[g.name].append(arg)
    fn.arg_attrs = ArrayAttr(arg_attrs)

    # one optimizer op per parameter, before the return
    cls = OP_CLASS[options.kind]
    props = options.properties()
    for g in grads:
        update = cls.create(operands=[g.param, g.value, *state_of[g.name]], properties=dict(props))
        update.set_origin(g.name)
        block.insert_op_before(update, ret)

    # drop the gradients from the results
    dropped = {g.result_index for g in grads}
    keep = [i for i in range(len(ret.operands)) if i not in dropped]
    new_ret = func.ReturnOp(*(ret.operands[i] for i in keep))
    block.insert_op_before(new_ret, ret)
    block.erase_op(ret)
    res_attrs = fn.res_attrs.data if fn.res_attrs is not None else ()
    fn.res_attrs = ArrayAttr([res_attrs[i] for i in keep]) if keep else None
    fn.properties["function_type"] = FunctionType.from_lists(
        [a.type for a in block.args], [fn.function_type.outputs.data[i] for i in keep])


_INVALID = re.compile(r"[^A-Za-z0-9_$.\-]")


def _state_hint(param: BlockArgument, name: str, suffix: str) -> str | None:
    """`%<param hint>_<suffix>` (e.g. `%w1_exp_avg`), else from the parameter's name."""
    hint = f"{param.name_hint or _INVALID.sub('_', name)}_{suffix}"
    return hint if SSAValue.is_valid_name(hint) else None
