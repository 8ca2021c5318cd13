"""The options of a training step, and parsing of option values the tools and the explorer share.

`StepOptions` declares every option that shapes a training step, once: its field's `option(...)`
metadata gives the command-line flag, help and commands; `monet_ir.pipeline` resolves the
options and builds the step from them (docs/architecture.md: adding an option). Both
`monet_ir.tools` (the command-line drivers) and `monet_ir.explore` (which rebuilds the training
step a tool would build) read these values, so they live on the ground floor, below both. A bad
value raises `UsageError` (one line naming the option and what is wrong).
"""

from __future__ import annotations

import argparse
import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from monet_ir.errors import UsageError, did_you_mean

# Byte multiples with their real meanings: SI prefixes are powers of 1000, IEC ones of 1024
BYTE_UNITS = {
    "": 1, "b": 1, "byte": 1, "bytes": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_SIZE = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*")


def size_in_bytes(text: str) -> float | None:
    """Bytes of a size such as `4000000`, `512 KiB`, `2.5MiB` or `10MB` (10 000 000); None when
    the text is not a size."""
    match = _SIZE.fullmatch(text)
    if match is None or match.group(2).lower() not in BYTE_UNITS:
        return None
    return float(match.group(1)) * BYTE_UNITS[match.group(2).lower()]


def parse_size(text: str, option: str) -> int:
    """A byte count for `option`: a number with an optional unit (B, kB/KB, MB, GB, TB = powers of
    1000; KiB, MiB, GiB, TiB = powers of 1024), rounded up to whole bytes."""
    import math

    value = size_in_bytes(text)
    if value is None or value < 0:
        raise UsageError(f"{option} {text}: expected a byte count such as 4000000, 512KiB, 2.5MiB or 10MB "
                         "(kB/MB/GB are powers of 1000, KiB/MiB/GiB of 1024)")
    return int(math.ceil(value))


def parse_dims(entries: Sequence[str]) -> dict[str, int]:
    """`--dim NAME=VALUE` entries as `{NAME: VALUE}`; VALUE a positive integer."""
    dims = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        if not sep or not name or not value.lstrip("-").isdigit() or int(value) <= 0:
            raise UsageError(f"--dim {entry}: expected NAME=VALUE with a positive integer VALUE")
        dims[name] = int(value)
    return dims


# ---------------------------------------------------------------------- the step's options

COMMANDS = ("report", "explore", "sweep", "plan")
EVERY_COMMAND = frozenset(COMMANDS)
LOSSES = ("cross-entropy", "mse", "sum", "none")
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")


@dataclass(frozen=True)
class Option:
    """How a `StepOptions` field appears outside Python. `flag`: its command-line spelling
    (a name without dashes is positional); `commands`: the `monet` commands that take it;
    `in_pass`: whether `monet-step{...}` takes it; `cli`: extra `argparse` keywords (choices,
    metavar, type); `add`/`read`: for an option spelled by several flags, the functions that add
    them to a parser and read the field's value back from the parsed arguments."""

    flag: str
    help: str
    commands: frozenset[str] = EVERY_COMMAND
    in_pass: bool = True
    cli: dict[str, Any] = field(default_factory=dict)
    add: Callable[[argparse.ArgumentParser, Option], None] | None = None
    read: Callable[[argparse.Namespace], Any] | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


def option(default: Any, flag: str, help: str, **how: Any) -> Any:
    """A `StepOptions` field: its default and how it is spelled (`Option`)."""
    if "commands" in how:
        how["commands"] = frozenset(how["commands"])
    return field(default=default, metadata={"option": Option(flag, help, **how)})


def _add_precision(parser: argparse.ArgumentParser, opt: Option) -> None:
    from monet_ir.precision import FORMAT_NAMES, TENSOR_CLASSES

    parser.add_argument("--precision", metavar="NAME|CLASS=NAME,...",
                        help=f"number format of every tensor class ({', '.join(FORMAT_NAMES)}), or one per class: "
                             f"{'=NAME,'.join(TENSOR_CLASSES)}=NAME (classes left out: fp32); default: the target's "
                             "or the model's")
    parser.add_argument("--mx-block", type=int, default=32, metavar="K",
                        help="elements per shared scale of vector MX groups (default 32)")
    parser.add_argument("--mx-group", default="vector", metavar="vector|square:RxC",
                        help="MX group shape: vector (1 x K along the reduction axis, default) or square:RxC "
                             "(e.g. square:8x8)")


def _read_precision(args: argparse.Namespace) -> str:
    """--precision with --mx-block/--mx-group folded in, as one policy text ("" without one)."""
    from monet_ir.precision import PrecisionError, policy_spec

    text = getattr(args, "precision", None)
    if not text:
        return ""
    try:
        return policy_spec(text, getattr(args, "mx_block", 32), getattr(args, "mx_group", "vector")) or ""
    except PrecisionError as e:
        raise UsageError(str(e)) from None


FREEZE_HELP = ("import this ONNX initializer as a frozen (non-trainable) weight: no gradient, no optimizer state "
               "(buffers and constants an exporter wrote as initializers); repeatable")


@dataclass(frozen=True)
class StepOptions:
    """Every option that shapes a training step (see the module docstring: adding one is a field
    here). Values are as the user spells them; `resolve` checks and loads them."""

    model: str = option("", "model", "ONNX model", in_pass=False)
    target: str = option("", "--target", "built-in target name or target YAML (ours or Stream's)",
                         commands=("report", "explore"))
    loss: str = option("cross-entropy", "--loss", "loss the training step minimizes (default cross-entropy)",
                       cli={"choices": LOSSES})
    labels: str = option("labels", "--labels", "name of the labels input the loss adds")
    optimizer: str = option("adam", "--optimizer", "optimizer of the step (default adam)",
                            cli={"choices": OPTIMIZERS})
    lr: float = option(1e-3, "--lr", "learning rate", cli={"type": float})
    precision: str = option("", "--precision", "number formats (a policy: monet_ir.precision)",
                            add=_add_precision, read=_read_precision)
    dims: tuple[str, ...] = option((), "--dim", "pin a symbolic ONNX dimension", in_pass=False,
                                   cli={"action": "append", "metavar": "NAME=N"})
    frozen: tuple[str, ...] = option((), "--freeze", FREEZE_HELP, in_pass=False,
                                     cli={"action": "append", "metavar": "NAME"})
    inference: bool = option(False, "--inference", "the forward pass only: no loss, no optimizer",
                             commands=("report",), cli={"action": "store_true"})
    checkpoint: str = option(
        "store-all", "--checkpoint",
        "activation checkpointing: store-all (default), recompute-all, sqrt, memory-budget=BYTES, "
        "list=NODE,NODE,... or plan=FILE.json (keep/recompute/page per saved activation) (the "
        "activation-checkpoint pass)", commands=("report", "sweep"), cli={"metavar": "POLICY"})
    fusion: str = option("none", "--fusion", "layer fusion: none, auto (stacks sized to the target's memories), or "
                         "explicit stacks by first and last ONNX node", commands=("report",),
                         cli={"metavar": "none|auto|FIRST:LAST[,FIRST:LAST...]"})
    tiles: int = option(0, "--tiles", "tiles per fused layer (default: from memory)", commands=("report",),
                        cli={"type": int})
    mapping: str = option("", "--mapping", "core allocation YAML (Stream style: name, core_allocation) or ZigZag "
                          "mapping YAML (spatial_mapping, memory_operand_links, temporal_ordering)",
                          commands=("report",))
    system: str = option("", "--system", "multi-chip system: built-in name (monet targets) or system YAML; the step "
                         "runs on every chip (see --parallel)", commands=("report", "explore", "plan"), in_pass=False)
    parallel: str = option("", "--parallel", "parallel plan on --system (default dp=1); also bucket=BYTES, "
                           "algorithm=ring|tree|hierarchical", commands=("report",), in_pass=False,
                           cli={"metavar": "dp=N,tp=N,pp=N[,zero=S][,microbatches=M]"})
    offchip: str = option("", "--offchip", "a Stream system YAML (or its offchip core file) whose DRAM a target "
                          "without one takes (a ZigZag/Stream core file alone); without it such a report warns that "
                          "off-chip traffic is unpriced", commands=("report", "explore", "sweep"),
                          cli={"metavar": "SYSTEM.yaml"})
    mapper: str = option("fast", "--mapper", "loop-nest mapper: fast (sampled loop orders, default) or exhaustive "
                         "(every loop order ZigZag's LOMA tries; seconds per distinct layer)",
                         commands=("report", "explore", "sweep"), cli={"choices": ("fast", "exhaustive")})
    mapper_objective: str = option("latency", "--mapper-objective", "what the mapper minimizes per loop nest "
                                   "(default latency; ties broken as ZigZag does)",
                                   commands=("report", "explore", "sweep"),
                                   cli={"choices": ("latency", "energy", "edp")})
    grad_dataflow: str = option("auto", "--grad-dataflow", "how a forward spatial mapping applies to gradient nests: "
                                "literal (the same loop dims, as ZigZag), translate (the loop dims in the same memory "
                                "roles); auto (default): literal for a --mapping file's entries, translate for a "
                                "core's own dataflows", commands=("report", "explore", "sweep"),
                                cli={"choices": ("auto", "literal", "translate")})
    pipeline: str = option("", "-p", "passes run after the step's own and before the costing (a pass pipeline as "
                           "monet-opt -p takes it: MONET's passes, xDSL's and those of installed plugins)",
                           commands=("report",), in_pass=False, cli={"metavar": "PIPELINE", "dest": "pipeline"})

    def __post_init__(self) -> None:
        # None for "not given" (as the Python API and older callers pass it) is the default, and
        # a list a tuple: equal options compare and print equal
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None:
                object.__setattr__(self, f.name, f.default)
            elif isinstance(value, list):
                object.__setattr__(self, f.name, tuple(value))

    @staticmethod
    def options() -> list[tuple[dataclasses.Field, Option]]:
        return [(f, f.metadata["option"]) for f in dataclasses.fields(StepOptions)]

    @classmethod
    def from_args(cls, args: argparse.Namespace, command: str, **changes: Any) -> StepOptions:
        """The options a `monet` command's parsed arguments give (fields the command does not
        take keep their defaults); `changes` replace fields (e.g. a command's own spelling)."""
        values: dict[str, Any] = {}
        for f, opt in cls.options():
            if command not in opt.commands:
                continue
            value = opt.read(args) if opt.read is not None else getattr(args, _dest(opt), None)
            if value is None:
                continue
            values[f.name] = tuple(value) if isinstance(value, list) else value
        values.update(changes)
        return cls(**values)

    def command_line(self) -> list[str]:
        """The `monet report` arguments that rebuild this step (the model first; options at their
        defaults left out)."""
        args = [self.model]
        for f, opt in self.options():
            value = getattr(self, f.name)
            if f.name == "model" or value == f.default or "report" not in opt.commands:
                continue
            if isinstance(value, bool):
                args.append(opt.flag)
            elif isinstance(value, tuple):
                for item in value:
                    args += [opt.flag, item]
            else:
                args += [opt.flag, repr(value) if isinstance(value, float) else str(value)]
        return args

    def report_args(self) -> list[str]:
        """`command_line()` (the name the explorer's outputs use)."""
        return self.command_line()

    def pass_options(self) -> dict[str, Any]:
        """The fields `monet-step{...}` takes, by name."""
        return {f.name: getattr(self, f.name) for f, opt in self.options() if opt.in_pass}


def _dest(opt: Option) -> str:
    return opt.cli.get("dest", opt.dest)


def add_step_arguments(parser: argparse.ArgumentParser, command: str, required: Sequence[str] = ()) -> None:
    """The command-line options of the `StepOptions` fields `command` takes (`required`: the
    fields this command cannot do without, by name). An option left out parses as None and the
    field keeps its default (`StepOptions.from_args`)."""
    for f, opt in StepOptions.options():
        if command not in opt.commands:
            continue
        if opt.add is not None:
            opt.add(parser, opt)
            continue
        if not opt.flag.startswith("-"):
            parser.add_argument(opt.flag, help=opt.help)
            continue
        kwargs = dict(opt.cli)
        if kwargs.get("action") == "append":
            kwargs["default"] = []
        elif kwargs.get("action") != "store_true":
            kwargs["default"] = None
        if f.name in required:
            kwargs["required"] = True
        flags = [opt.flag] if opt.flag.startswith("--") else [opt.flag, "--" + f.name]
        parser.add_argument(*flags, help=opt.help, **kwargs)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser for MONET's tools, whose errors say what was meant: an invalid choice
    (`--optimizer adamm`) and an unrecognized option (`--optimiser`) name the closest valid one.
    Sub-command parsers are of this class too (argparse makes them of the parent's class)."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        if action.choices is not None and value not in action.choices:
            choices = [str(c) for c in action.choices]
            raise argparse.ArgumentError(action, f"invalid choice: {value!r}{did_you_mean(str(value), choices)} "
                                                 f"(choose from {', '.join(choices)})")
        super()._check_value(action, value)

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> argparse.Namespace:
        import sys

        args = list(sys.argv[1:] if args is None else args)
        namespace, extras = self.parse_known_args(args, namespace)
        parser = self._chosen_parser(namespace)
        if extras:
            flags = [flag for action in parser._actions for flag in action.option_strings]
            hints = [did_you_mean(x.split("=", 1)[0], flags) for x in extras if x.startswith("-")]
            parser.error(f"unrecognized arguments: {' '.join(extras)}" + "".join(h for h in hints if h))
        namespace.given_options = parser.given(args)
        return namespace

    def given(self, args: Sequence[str]) -> frozenset[str]:
        """The destinations of the options `args` spell out (abbreviations included), so that a
        tool can tell an option given from its default."""
        found = set()
        for token in args:
            if token == "--":
                break
            if not token.startswith("-") or token == "-":
                continue
            flag = token.split("=", 1)[0]
            action = self._option_string_actions.get(flag)
            if action is None and flag.startswith("--"):
                matches = {a for s, a in self._option_string_actions.items() if s.startswith(flag)}
                action = matches.pop() if len(matches) == 1 else None
            if action is not None:
                found.add(action.dest)
        return frozenset(found)

    def _chosen_parser(self, namespace: argparse.Namespace) -> argparse.ArgumentParser:
        """The sub-command's parser the arguments chose (this one when there is none)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                chosen = action.choices.get(getattr(namespace, action.dest, None) or "")
                if isinstance(chosen, ArgumentParser):
                    return chosen._chosen_parser(namespace)
        return self
