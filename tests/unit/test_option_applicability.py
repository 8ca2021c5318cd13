"""No option is accepted and ignored: every option of every `monet` sub-command is either given
here on an input where it cannot apply, and must then be refused in one line naming it, or listed
as one that applies to every run of that command, with the reason. A new option that is in
neither table fails `test_every_option_is_covered`."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from monet_ir.tools.monet import build_parser, main

REPO = Path(__file__).resolve().parents[2]
LENET = str(REPO / "tests" / "data" / "models" / "lenet5_b4.onnx")
ORT = str(REPO / "tests" / "data" / "ort_corpus" / "mlp.training.onnx")

# (command, option) -> arguments (after the command) where the option cannot apply, and a word
# the one-line error must contain (the option's flag unless said otherwise)
INAPPLICABLE: dict[tuple[str, str], tuple[list[str], str]] = {
    ("report", "--target"): (["--target", "edge_npu", "--system", "2x2_edge_npu"], "--target"),
    ("report", "--system"): (["--system", "2x2_edge_npu", "--target", "edge_npu"], "--target does not go with --system"),
    ("report", "--loss"): (["--target", "edge_npu", "--inference", "--loss", "mse"], "--loss"),
    ("report", "--labels"): (["--target", "edge_npu", "--loss", "sum", "--labels", "y"], "--labels"),
    ("report", "--optimizer"): ([ORT, "--target", "edge_npu", "--optimizer", "sgd"], "--optimizer sgd"),
    ("report", "--lr"): (["--target", "edge_npu", "--inference", "--lr", "0.1"], "--lr"),
    ("report", "--precision"): (["--system", "2x2_edge_npu", "--precision", "mxfp8_e4m3"], "--precision"),
    ("report", "--mx-block"): (["--target", "edge_npu", "--mx-block", "16"], "--mx-block"),
    ("report", "--mx-group"): (["--target", "edge_npu", "--mx-group", "square:8x8"], "--mx-group"),
    ("report", "--dim"): (["--target", "edge_npu", "--dim", "batch=8"], "--dim batch"),
    ("report", "--freeze"): (["--target", "edge_npu", "--freeze", "no.such.weight"], "no.such.weight"),
    ("report", "--inference"): ([ORT, "--target", "edge_npu", "--inference"], "--inference"),
    ("report", "--checkpoint"): (["--target", "edge_npu", "--inference", "--checkpoint", "sqrt"], "--checkpoint"),
    ("report", "--fusion"): (["--system", "2x2_edge_npu", "--fusion", "auto"], "--fusion"),
    ("report", "--tiles"): (["--target", "edge_npu", "--tiles", "4"], "--tiles"),
    ("report", "--mapping"): (["--target", "edge_npu", "--mapping", "MAPPING"], "names no node"),
    ("report", "--parallel"): (["--target", "edge_npu", "--parallel", "dp=2"], "--parallel"),
    ("report", "--plot-format"): (["--target", "edge_npu", "--no-plots", "--plot-format", "png"], "--plot-format"),
    ("plan", "--labels"): (["--system", "2x2_edge_npu", "--loss", "sum", "--labels", "y"], "--labels"),
    ("plan", "--precision"): (["--system", "2x2_edge_npu", "--precision", "mxfp8_e4m3"], "--precision"),
    ("plan", "--mx-block"): (["--system", "2x2_edge_npu", "--mx-block", "16"], "--mx-block"),
    ("plan", "--mx-group"): (["--system", "2x2_edge_npu", "--mx-group", "square:8x8"], "--mx-group"),
    ("plan", "--dim"): (["--system", "2x2_edge_npu", "--dim", "batch=8"], "--dim batch"),
    ("plan", "--freeze"): (["--system", "2x2_edge_npu", "--freeze", "no.such.weight"], "no.such.weight"),
    ("explore", "--target"): (["--system", "2x2_edge_npu", "--search", "parallel", "--target", "edge_npu"],
                              "--target"),
    ("explore", "--system"): (["--target", "edge_npu", "--system", "2x2_edge_npu"], "--system"),
    ("explore", "--labels"): (["--target", "edge_npu", "--loss", "sum", "--labels", "y"], "--labels"),
    ("explore", "--mx-block"): (["--target", "edge_npu", "--mx-block", "16"], "--mx-block"),
    ("explore", "--mx-group"): (["--target", "edge_npu", "--mx-group", "square:8x8"], "--mx-group"),
    ("explore", "--dim"): (["--target", "edge_npu", "--dim", "batch=8", "--generations", "0"], "--dim batch"),
    ("explore", "--freeze"): (["--target", "edge_npu", "--freeze", "no.such.weight", "--generations", "0"],
                              "no.such.weight"),
    ("explore", "--plot-format"): (["--target", "edge_npu", "--no-plots", "--plot-format", "png"], "--plot-format"),
    ("explore", "--objective"): (["--system", "2x2_edge_npu", "--search", "parallel", "--objective", "checkpoint"],
                                 "--objective"),
    ("explore", "--population"): (["--system", "2x2_edge_npu", "--search", "parallel", "--population", "4"],
                                  "--population"),
    ("explore", "--generations"): (["--system", "2x2_edge_npu", "--search", "parallel", "--generations", "4"],
                                   "--generations"),
    ("explore", "--seed"): (["--system", "2x2_edge_npu", "--search", "parallel", "--seed", "4"], "--seed"),
    ("explore", "--jobs"): (["--system", "2x2_edge_npu", "--search", "parallel", "--jobs", "1"], "--jobs"),
    ("explore", "--budget"): (["--target", "cortex_m_mcu", "--objective", "energy", "--memory-budget", "200kB",
                               "--budget", "1MB"], "--budget"),
    ("explore", "--memory-budget"): (["--target", "edge_npu", "--memory-budget", "1MB"], "--memory-budget"),
    ("explore", "--time-budget"): (["--target", "edge_npu", "--time-budget", "1000"], "--time-budget"),
    ("explore", "--exact"): (["--system", "2x2_edge_npu", "--search", "parallel", "--exact"], "--exact"),
    ("explore", "--time-limit"): (["--target", "edge_npu", "--time-limit", "5"], "--time-limit"),
    ("explore", "--microbatches"): (["--target", "edge_npu", "--microbatches", "2"], "--microbatches"),
    ("explore", "--zero"): (["--target", "edge_npu", "--zero", "1"], "--zero"),
    ("explore", "--tp"): (["--target", "edge_npu", "--tp", "2"], "--tp"),
    ("explore", "--bucket"): (["--target", "edge_npu", "--bucket", "1000"], "--bucket"),
    ("explore", "--precisions"): (["--target", "edge_npu", "--precisions", "bf16"], "--precisions"),
    ("explore", "--mx-groups"): (["--target", "edge_npu", "--mx-groups", "vector"], "--mx-groups"),
    ("explore", "--backend"): (["--target", "cortex_m_mcu", "--objective", "energy", "--memory-budget", "200kB",
                                "--backend", "ray"], "--backend ray"),
    ("explore", "--ray-address"): (["--target", "edge_npu", "--ray-address", "auto"], "--ray-address"),
    ("explore", "--resume"): (["--target", "cortex_m_mcu", "--objective", "energy", "--memory-budget", "200kB",
                               "--resume", "RESUME"], "--resume"),
    ("sweep", "--labels"): (["--target-template", "edge_npu", "--set", "dram.bandwidth_GBps=4", "--loss", "sum",
                             "--labels", "y"], "--labels"),
    ("sweep", "--mx-block"): (["--target-template", "edge_npu", "--set", "dram.bandwidth_GBps=4", "--mx-block", "16"],
                              "--mx-block"),
    ("sweep", "--mx-group"): (["--target-template", "edge_npu", "--set", "dram.bandwidth_GBps=4", "--mx-group",
                               "square:8x8"], "--mx-group"),
    ("sweep", "--dim"): (["--target-template", "edge_npu", "--set", "dram.bandwidth_GBps=4", "--dim", "batch=8"],
                         "--dim batch"),
    ("sweep", "--freeze"): (["--target-template", "edge_npu", "--set", "dram.bandwidth_GBps=4", "--freeze",
                             "no.such.weight"], "no.such.weight"),
    ("sweep", "--plot-format"): (["--target-template", "edge_npu", "--set", "dram.bandwidth_GBps=4", "--no-plots",
                                  "--plot-format", "png"], "--plot-format"),
    ("sweep", "--set"): (["--target-template", "edge_npu", "--set", "dram.bandwidthh_GBps=4"], "--set"),
    ("sweep", "--ray-address"): (["--target-template", "edge_npu", "--set", "dram.bandwidth_GBps=4", "--ray-address",
                                  "auto"], "--ray-address"),
}

# (command, option) -> why it applies to every run of the command
ALWAYS: dict[tuple[str, str], str] = {
    **{(c, "model"): "the model every run reads" for c in ("report", "plan", "explore", "sweep")},
    **{(c, "--out"): "where every run writes" for c in ("report", "plan", "explore", "sweep")},
    ("targets", "target"): "the targets or systems described",
    ("report", "-p"): "the user's passes run on every step, before the costing",
    **{(c, "--no-plots"): "every run draws plots unless told not to" for c in ("report", "explore", "sweep")},
    **{(c, "--no-cost-cache"): "every run prices ops through the cost cache" for c in ("report", "explore", "sweep")},
    **{(c, o): "every step of a forward model has a loss and an optimizer (an ORT graph is refused by --system, "
               "and by report as above)" for c in ("plan", "explore", "sweep") for o in ("--loss", "--optimizer", "--lr")},
    ("explore", "--precision"): "every candidate is priced in it",
    ("sweep", "--precision"): "every design is priced in it",
    ("sweep", "--checkpoint"): "every design's step is checkpointed so",
    ("plan", "--system"): "the system every plan runs on",
    **{("plan", o): "a dimension of the plan search" for o in ("--microbatches", "--zero", "--tp", "--bucket")},
    ("explore", "--search"): "what every search searches",
    ("sweep", "--target-template"): "the template every design derives from",
    ("sweep", "--jobs"): "designs evaluated at once, on either backend",
    ("sweep", "--backend"): "where every design is evaluated",
    ("sweep", "--resume"): "any sweep's csv can be resumed",
}


# options added on main (issue 26: ZigZag mappings and mappers) while this walk was landed: where
# each cannot apply is not checked yet (--offchip on a target with its own DRAM, --grad-dataflow
# without a spatial mapping); listed so that the gap is visible, not hidden
NOT_CHECKED_YET: set[tuple[str, str]] = {(c, o) for c in ("report", "explore", "sweep")
                                         for o in ("--offchip", "--mapper", "--mapper-objective", "--grad-dataflow")}


def _options() -> set[tuple[str, str]]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {(name, a.option_strings[0] if a.option_strings else a.dest) for name, parser in sub.choices.items()
            for a in parser._actions if a.dest != "help"}


def test_every_option_is_covered():
    options = _options()
    assert not set(INAPPLICABLE) & set(ALWAYS)
    missing = options - set(INAPPLICABLE) - set(ALWAYS) - NOT_CHECKED_YET
    assert not missing, f"options in neither table (add where each cannot apply): {sorted(missing)}"
    assert not (set(INAPPLICABLE) | set(ALWAYS) | NOT_CHECKED_YET) - options, "tables name options that no longer exist"


@pytest.mark.parametrize("command, option", sorted(INAPPLICABLE))
def test_an_option_that_cannot_apply_is_refused(command, option, tmp_path, capsys):
    args, word = INAPPLICABLE[(command, option)]
    args = [str(tmp_path / "mapping.yaml") if a == "MAPPING" else str(tmp_path / "r") if a == "RESUME" else a
            for a in args]
    (tmp_path / "mapping.yaml").write_text("- name: /conv1/Convv\n  core_allocation: [0]\n")
    model = [] if args and args[0].endswith(".onnx") else [LENET]
    outputs = [] if "--resume" in args else ["--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as code:
        main([command, *model, *args, *outputs])
    err = capsys.readouterr().err
    assert code.value.code not in (0, None), f"{command} {option} was accepted: {args}"
    errors = [line for line in err.splitlines() if " error: " in line or line.startswith("monet: error")]
    assert errors and word in errors[-1], err
    assert "Traceback" not in err and "internal error" not in err
