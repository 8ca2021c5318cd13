"""What would make a step fit a target too small for it: `monet report` prints these suggestions,
each with the command that tries it, before its one-line error (`DramTooSmall`).

The step's main memory holds its model state (parameters, gradients, optimizer state), the
saved activations and the batch. Each way out acts on a part of it:

- `--precision bf16` halves every float tensor (when the step is in fp32 and the cores run bf16);
- `--checkpoint memory-budget=BYTES` recomputes saved activations down to BYTES (the excess
  taken off what is saved), `--checkpoint sqrt` all but about the square root of them;
- `--system SYSTEM --parallel dp=N,zero=3` shares the model state among N chips (a built-in
  system of this chip, when there is one);
- a plan keeping tensors in the target's storage level (`monet explore --objective energy`),
  when the target has one.

The one-chip ways are tried (built and scheduled, so each line gives the peak measured); the
multi-chip way is an estimate (peak less the model state's share of the other chips).
"""

from __future__ import annotations

import dataclasses
from typing import Any


def fit_suggestions(resolved: Any, peak: int, capacity: int, say: Any = None) -> list[str]:
    """One line per way out of a step that needs `peak` bytes of a `capacity`-byte DRAM. The
    one-chip ways (a narrower precision, checkpointing, both) are tried: each is built and
    scheduled, so its line gives the peak it measured; the multi-chip way is estimated."""
    from monet_ir.analysis.accounting import memory_summary
    from monet_ir.graph import element_precision, step_function
    from monet_ir.pipeline import STAGES, build_step

    options, target = resolved.options, resolved.target
    built = build_step(resolved, stages=tuple(s for s in STAGES if s != "cost"))
    fn = step_function(built.module)
    memory = memory_summary(fn, resolved.bits)
    state = memory["parameter_bytes"] + memory["gradient_bytes"] + memory["optimizer_state_bytes"]
    saved = memory["saved_activation_bytes"]
    over = peak - capacity

    def command(**changes: Any) -> str:
        return " ".join(["monet", "report", *dataclasses.replace(options, **changes).command_line(), "--out", "DIR"])

    tries: list[tuple[str, dict[str, str]]] = []
    narrower = _runs_wider_than_16_bits(resolved, element_precision(fn)) and _can_run(target, "bf16")
    if narrower:
        tries.append(("--precision bf16 halves every float tensor", {"precision": "bf16"}))
    if saved and built.training and options.checkpoint == "store-all":
        if saved > over:
            budget = saved - over
            tries.append((f"--checkpoint memory-budget={budget}B recomputes saved activations ({saved:,} bytes) "
                          f"down to {budget:,}", {"checkpoint": f"memory-budget={budget}B"}))
        tries.append(("--checkpoint sqrt recomputes all but about the square root of the saved activations",
                      {"checkpoint": "sqrt"}))
    lines = []
    fitted = False
    for text, changes in tries:
        if say is not None:
            say(f"trying {' '.join(f'--{k} {v}' for k, v in changes.items())}")
        needed = _peak_with(resolved, changes)
        fits = needed is not None and needed <= capacity
        fitted |= fits
        lines.append(f"{text}: {_outcome(needed, capacity)}: {command(**changes)}")
    if narrower and len(tries) > 1 and not fitted:
        changes = {"precision": "bf16", "checkpoint": "sqrt"}
        if say is not None:
            say("trying --precision bf16 --checkpoint sqrt")
        needed = _peak_with(resolved, changes)
        lines.append(f"both bf16 and sqrt: {_outcome(needed, capacity)}: {command(**changes)}")
    systems = _systems_of(target.name)
    if state and systems:
        name, chips = systems[0]
        estimate = peak - state + state / chips
        lines.append(f"--system {name} --parallel dp={chips},zero=3 shares the model state ({state:,} bytes: "
                     f"parameters, gradients, optimizer state) among {chips} chips (estimate: about {estimate:,.0f} "
                     f"bytes per chip): {command(target='', system=name, parallel=f'dp={chips},zero=3')}")
    elif state:
        lines.append(f"a system of {target.name} chips (a YAML file with `chip: {target.name}`, docs/parallel.md) "
                     f"with --parallel dp=N,zero=3 shares the model state ({state:,} bytes) among N chips")
    if target.storage is not None and not options.checkpoint.startswith("plan="):
        args = dataclasses.replace(options, checkpoint="store-all").command_line()
        lines.append(f"keeping tensors in its storage '{target.storage.name}' (a plan file; docs/poet.md) lets any "
                     f"step fit: monet explore {' '.join(args)} --objective energy --memory-budget {capacity} "
                     "--out DIR, then --checkpoint plan=DIR/plan.json")
    return lines


def _peak_with(resolved: Any, changes: dict[str, str]) -> int | None:
    """The DRAM peak of the step with these options changed, scheduled (None: it fails otherwise)."""
    from monet_ir.errors import MonetError
    from monet_ir.pipeline import build_step, resolve
    from monet_ir.schedule.scheduler import DramTooSmall

    try:
        built = build_step(resolve(dataclasses.replace(resolved.options, **changes)))
    except DramTooSmall as e:
        return e.peak
    except MonetError:
        return None
    return built.schedule.peaks().get(resolved.target.dram.name) if resolved.target.dram is not None else None


def _outcome(needed: int | None, capacity: int) -> str:
    if needed is None:
        return "cannot run here"
    return f"needs {needed:,} bytes, {'fits' if needed <= capacity else 'not enough alone'}"


def _runs_wider_than_16_bits(resolved: Any, own: str) -> bool:
    """Whether the step's tensors are wider than 16 bits: the chosen format, else the model's."""
    name = resolved.precision.name if resolved.precision is not None else None
    return (name or own) == "fp32"


def _can_run(target: Any, precision: str) -> bool:
    from targets.precision_choice import choose_precision

    try:
        choose_precision(target, precision)
    except Exception:  # a core that cannot run it: the choice refuses (its error is the user's, not ours)
        return False
    return True


def _systems_of(chip: str) -> list[tuple[str, int]]:
    """(name, chips) of the built-in systems made of this chip, fewest chips first."""
    from targets.system import get_system, list_builtin_systems

    found = []
    for name in list_builtin_systems():
        system = get_system(name)
        if system.chip.name == chip:
            found.append((name, system.chips))
    return sorted(found, key=lambda s: s[1])
