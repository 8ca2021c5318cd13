"""Load a target by built-in name or from a file, in our format or Stream/ZigZag's.

Formats are told apart by their top-level keys:
* a Stream system has ``cores`` as a mapping of id -> core file (plus ``offchip_core`` or
  ``offchip_core_id``, ``core_connectivity``...), or, in Stream's files of 2024, as a list of core
  files with a generated ``graph`` (`stream_legacy`);
* a ZigZag core has ``memories`` and ``operational_array`` (or ``multipliers``); it loads as a
  one-core target;
* anything else is read as our own format (``cores`` is a list).

Every problem of a file is collected and raised together as one `TargetError`, one line each.
`yaml` is imported inside the functions that parse, to keep ``import targets`` cheap. Every file
is read through `monet_ir.untrusted` (alias expansion, nesting and size bounded before any value
is looked at).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any

from monet_ir.errors import did_you_mean

from .errors import Problems, TargetError
from .model import DEFAULT_MAPPER, Core, Dram, Interconnect, MapperOptions, Target
from .own_format import read_own_target
from .stream_legacy import is_list_system, translate_list_system
from .zigzag_format import (
    STREAM_CORE_NAMESPACES,
    resolve_core_path,
    ZIGZAG_DEFAULT_REASON,
    cover_every_op,
    read_offchip,
    read_stream_system,
    read_zigzag_core,
    unsupported_core,
)

BUILTIN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "builtin")


def list_builtin_targets() -> list[str]:
    """Names of the targets shipped in targets/builtin/."""
    return sorted(name[: -len(".yaml")] for name in os.listdir(BUILTIN_DIR) if name.endswith(".yaml"))


def parse_yaml(path: str, problems: Problems) -> Any:
    """Parse a YAML file; a missing file or bad syntax becomes a problem line, not a traceback."""
    import yaml

    from monet_ir.untrusted import UntrustedFileError, read_yaml_file

    try:
        # libyaml's parser when PyYAML has it; aliases, nesting and size bounded
        # (monet_ir.untrusted) before anything reads the values
        data = read_yaml_file(path)
        return data if not impossible_numbers(data, problems, path) else None
    except UntrustedFileError as error:
        problems.add("<file>", str(error).removeprefix(f"{path}: "), file=path)
    except FileNotFoundError:
        problems.add("<file>", "file not found", file=path)
    except IsADirectoryError:
        problems.add("<file>", "is a directory, not a YAML file", file=path)
    except UnicodeDecodeError as error:
        problems.add("<file>", f"not UTF-8 text ({error.reason})", file=path)
    except OSError as error:
        problems.add("<file>", f"cannot read: {error.strerror}", file=path)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}" if mark is not None else "<yaml>"
        reason = getattr(error, "problem", None) or str(error)
        problems.add(where, f"invalid YAML: {reason}", file=path)
    return None


def impossible_numbers(data: Any, problems: Problems, file: str) -> bool:
    """Whether any number anywhere in a parsed file, read by MONET or not, is NaN, infinite or
    of an absurd magnitude (`fields.MAX_MAGNITUDE`); each is a problem naming its field. Checked
    once per file, before any field is read, so that no reader (and no field MONET ignores,
    such as ZigZag's `input_precision`) takes such a value."""
    import math

    from .fields import MAX_MAGNITUDE, join

    found = False
    seen: set[int] = set()  # a mapping or list a YAML alias repeats is visited once
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, (dict, list)):
            if id(value) in seen:
                continue
            seen.add(id(value))
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((join(path, key), item) for key, item in items)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            if isinstance(value, float) and not math.isfinite(value):
                problems.add(path, f"expected a finite number, got {value}", file=file)
                found = True
            elif abs(value) > MAX_MAGNITUDE:
                problems.add(path, f"{value:g} is beyond any hardware this describes (more than {MAX_MAGNITUDE:g})",
                             file=file)
                found = True
    return found


def _is_stream_system(data: dict) -> bool:
    return (isinstance(data.get("cores"), dict) or "core_connectivity" in data or "offchip_core" in data
            or "offchip_core_id" in data)


def _is_zigzag_core(data: dict) -> bool:
    return "memories" in data and ("operational_array" in data or "multipliers" in data or "imc" in data)


def _is_stream_typed_core(data: dict) -> bool:
    """A Stream core file of a kind that is not a ZigZag core (``type: aie2.compute``...)."""
    kind = data.get("type")
    return isinstance(kind, str) and kind.partition(".")[0] in STREAM_CORE_NAMESPACES and "cores" not in data


def load_target_file(path: str, precision: str | None = None) -> Target:
    """Load a target description file of any supported format."""
    problems = Problems(path)
    data = parse_yaml(path, problems)
    problems.raise_if_any()
    if not isinstance(data, dict):
        problems.add("<top>", f"expected a mapping at the top level, got {type(data).__name__}")
        problems.raise_if_any()
    if "chip" in data and ("chips" in data or "network" in data):
        problems.add("chip", "this is a multi-chip system file (a `chip` copied `chips` times on a `network`), "
                     "not one chip: give it as --system FILE (with --parallel); `monet targets FILE` describes it")
        problems.raise_if_any()
    if is_list_system(data):
        translated = translate_list_system(data, problems)
        problems.raise_if_any()
        target = read_stream_system(translated, path, problems, parse_yaml, precision, listed=True)
    elif _is_stream_system(data):
        target = read_stream_system(data, path, problems, parse_yaml, precision)
    elif _is_zigzag_core(data):
        target = _single_core_target(data, path, problems, precision)
    elif _is_stream_typed_core(data):
        problems.add("type", unsupported_core(data) or "a Stream core file without `memories` and "
                     "`operational_array`: MONET cannot cost it")
        target = None
    else:
        target = read_own_target(data, path, problems)
    problems.raise_if_any()
    assert target is not None
    return target


def _single_core_target(data: dict, path: str, problems: Problems, precision: str | None) -> Target | None:
    core = read_zigzag_core(data, path, problems, 0, precision)
    if core is None:
        return None
    if core.array.units <= 0:
        if any(".sizes" in line for line in problems.lines):
            return None  # a size already refused: not a memory-only file
        kind = data.get("type") if isinstance(data.get("type"), str) else ""
        what = (f"a core of type {kind}, a memory the compute cores of a Stream system share" if kind.endswith(".memory")
                else "an off-chip memory description, Stream's offchip_core?")
        problems.add("operational_array.sizes", f"this core has no compute units ({what}): it cannot be a target "
                     "on its own")
        return None
    (core,) = cover_every_op([core])
    dram = _sibling_offchip(path, problems)
    if dram is not None:
        core = replace(core, dram=dram)
    return Target(core.name, (core,), dram, Interconnect(), (), core.clock_hz, path,
                  precision or "int8", "" if precision else ZIGZAG_DEFAULT_REASON)


def _sibling_offchip(core_path: str, problems: Problems) -> Dram | None:
    """The DRAM of a Stream core file used alone: Stream keeps it in `offchip.yaml` beside the
    core files (its systems name it as `offchip_core`); a ZigZag core that lists its own DRAM
    level needs none."""
    path = os.path.join(os.path.dirname(os.path.abspath(core_path)), "offchip.yaml")
    if os.path.abspath(core_path) == path or not os.path.isfile(path):
        return None
    offchip_problems = Problems(path)
    dram = read_offchip(parse_yaml(path, offchip_problems), path, offchip_problems)
    problems.extend(offchip_problems)
    return dram


def load_zigzag_core(path: str, core_id: int = 0, precision: str | None = None, kind: str | None = None) -> Core:
    """One ZigZag core YAML as a Core (no DRAM attached)."""
    problems = Problems(path)
    data = parse_yaml(path, problems)
    problems.raise_if_any()
    core = read_zigzag_core(data, path, problems, core_id, precision, kind)
    problems.raise_if_any()
    assert core is not None
    return core


def target_from_zigzag_core(core_path: str, offchip_path: str | None = None, precision: str | None = None) -> Target:
    """A one-core target from a ZigZag core YAML, with the DRAM of a Stream offchip core file."""
    (core,) = cover_every_op([load_zigzag_core(core_path, precision=precision)])
    dram = None
    if offchip_path is not None:
        problems = Problems(offchip_path)
        dram = read_offchip(parse_yaml(offchip_path, problems), offchip_path, problems)
        problems.raise_if_any()
    core = replace(core, dram=dram)
    return Target(core.name, (core,), dram, Interconnect(), (), core.clock_hz, core_path,
                  precision or "int8", "" if precision else ZIGZAG_DEFAULT_REASON)


def builtin_target_path(name: str) -> str | None:
    """The YAML file of a built-in target, or None when `name` is not one."""
    if not isinstance(name, str) or os.sep in name or name.endswith((".yaml", ".yml")):
        return None
    path = os.path.join(BUILTIN_DIR, f"{name}.yaml")
    return path if os.path.isfile(path) else None


def offchip_dram(path: str) -> Dram:
    """The DRAM of a Stream system file (its `offchip_core`) or of a Stream off-chip core file,
    for a target that has none (`--offchip`)."""
    problems = Problems(path)
    data = parse_yaml(path, problems)
    problems.raise_if_any()
    if isinstance(data, dict) and _is_stream_system(data):
        offchip = data.get("offchip_core")
        core_path = resolve_core_path(path, str(offchip)) if offchip is not None else None
        if core_path is None:
            problems.add("offchip_core", "this Stream system names no off-chip core file" if offchip is None
                         else f"core file {offchip!r} not found next to the system file or in cores/")
            problems.raise_if_any()
        path, problems = core_path, Problems(core_path)
        data = parse_yaml(path, problems)
        problems.raise_if_any()
    sizes = (data.get("operational_array") or {}).get("sizes") if isinstance(data, dict) else None
    if isinstance(sizes, list) and sizes and all(isinstance(n, int) and n > 0 for n in sizes):
        problems.add("operational_array", "a compute core, not an off-chip memory: expected a Stream system or its "
                     "offchip core file")
        problems.raise_if_any()
    dram = read_offchip(data, path, problems) if isinstance(data, dict) else None
    if dram is None and not problems:
        problems.add("memories", "no off-chip memory with ports: expected a Stream system or its offchip core file")
    problems.raise_if_any()
    assert dram is not None
    return dram


def with_dram(target: Target, dram: Dram) -> Target:
    """`target` with `dram` as its off-chip memory (every core spills to it)."""
    return replace(target, dram=dram, cores=tuple(replace(core, dram=dram) for core in target.cores))


def missing_dram_warning(target: Target) -> str | None:
    """What a report must say when the target describes no off-chip memory: the scheduler then
    moves tensors that leave the cores' memories for free and without a capacity limit."""
    if target.dram is not None:
        return None
    where = f" ({os.path.basename(target.source)})" if target.source else ""
    return (f"target '{target.name}'{where} describes no off-chip memory: off-chip traffic is unpriced and "
            "unbounded (tensors that leave the cores' memories move for free, in unlimited room); give --offchip "
            "SYSTEM.yaml to use the DRAM of a Stream system")


def with_mapper(target: Target, mapper: MapperOptions) -> Target:
    """`target` with every core's loop nests mapped under `mapper`."""
    if all(core.mapper == mapper for core in target.cores):
        return target
    return replace(target, cores=tuple(replace(core, mapper=mapper) for core in target.cores))


def warn_missing_dram(target: Target | None) -> str | None:
    """Say on stderr when the target has no off-chip memory (`missing_dram_warning`); returns
    the warning for the report."""
    import sys

    warning = missing_dram_warning(target) if target is not None else None
    if warning:
        print(f"monet: warning: {warning}", file=sys.stderr, flush=True)
    return warning


def mapper_options(args: Any) -> MapperOptions:
    """The `MapperOptions` of the command line's --mapper, --mapper-objective and --grad-dataflow."""
    return MapperOptions(getattr(args, "mapper", "fast"), getattr(args, "mapper_objective", "latency"),
                         getattr(args, "grad_dataflow", "auto"))


def get_target(name_or_path: str, precision: str | None = None, offchip: str | None = None,
               mapper: MapperOptions | None = None) -> Target:
    """A built-in target by name (see `list_builtin_targets`) or a target file by path.
    `precision` may be a whole policy (`monet_ir.precision`): Stream/ZigZag cores run its
    weights' format. `offchip`: a Stream system or off-chip core file whose DRAM the target
    takes (`offchip_dram`). `mapper`: how loop nests are mapped on its cores (`MapperOptions`)."""
    target = _get_target(name_or_path, precision)
    if offchip:
        target = with_dram(target, offchip_dram(offchip))
    return with_mapper(target, mapper) if mapper is not None and mapper != DEFAULT_MAPPER else target


def _get_target(name_or_path: str, precision: str | None = None) -> Target:
    if precision and ("=" in precision or ";" in precision):
        from monet_ir.precision import PrecisionError, parse_precision

        try:
            precision = parse_precision(precision).weights
        except PrecisionError as e:
            raise TargetError(str(e)) from None
    if not isinstance(name_or_path, str) or not name_or_path:
        raise TargetError(f"{name_or_path!r}: <name>: expected a built-in target name or a file path")
    builtin = builtin_target_path(name_or_path)
    if builtin is not None:
        return load_target_file(builtin, precision)
    if os.path.exists(name_or_path):
        return load_target_file(name_or_path, precision)
    system_file = os.path.join(BUILTIN_DIR, "systems", f"{name_or_path}.yaml")
    if os.path.isfile(system_file):
        with open(system_file, encoding="utf-8") as handle:
            chip = next((line.split(":", 1)[1].split("#")[0].strip() for line in handle if line.startswith("chip:")), "")
        raise TargetError(f"{name_or_path}: <name>: a built-in multi-chip system, not one chip: give it as "
                          f"--system {name_or_path} (with --parallel), or its chip as --target {chip}")
    known = ", ".join(list_builtin_targets())
    raise TargetError(f"{name_or_path}: <name>: no such file and no built-in target of that name"
                      f"{did_you_mean(name_or_path, list_builtin_targets() + builtin_system_names())} (built-in: {known})")


def builtin_system_names() -> list[str]:
    """The built-in multi-chip systems' names (`targets/builtin/systems`), without loading them."""
    folder = os.path.join(BUILTIN_DIR, "systems")
    if not os.path.isdir(folder):
        return []
    return sorted(name[: -len(".yaml")] for name in os.listdir(folder) if name.endswith(".yaml"))


def resolve_target(name: str, requested: str | None, offchip: str | None = None, mapper: MapperOptions | None = None):
    """The target of that name or file, loaded for the `requested` precision (a policy's text or
    None), with the DRAM of `offchip` (`offchip_dram`) when given, and the precision chosen on it
    (`PrecisionChoice`): the one rule every tool and pass follows."""
    from .precision_choice import choose_precision

    target = get_target(name, precision=requested or None, offchip=offchip or None, mapper=mapper)
    return target, choose_precision(target, requested or None)
