"""The ONNX Runtime training-graph corpus (tests/data/ort_corpus, made by its make_ort_corpus.py
with onnxruntime-training's generate_artifacts): every training graph imports and `monet report`
costs it as imported on a built-in target, or fails in one line naming the node (REFUSED, empty
today).

Each training graph is compared with MONET's own step for the forward export it was built from
(`<arch>.forward.onnx`, imported with the parameters ORT does not train frozen, then `autodiff`):
- forward matrix-product/convolution FLOPs are equal (the same model);
- backward matrix-product/convolution FLOPs are equal (ORT and `autodiff` compute the same
  products: dX and dW of every layer that needs them);
- element-wise ("other") FLOPs differ only by how each writes the rest: ORT fuses a decomposed
  LayerNorm or RMSNorm into one op, accumulates every gradient into its buffer (one addition per
  trained parameter, counted in ORT's backward), writes ReLU6's gradient as five compare/logic
  ops and recomputes SiLU's sigmoid in its gradient; the bounds below hold those differences.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[1] / "data" / "ort_corpus"
MANIFEST = json.loads((CORPUS / "manifest.json").read_text())
ARCHITECTURES = sorted(m["architecture"] for m in MANIFEST["models"])
TARGET = "edge_npu"

# architecture -> what the one-line error of its training graph says (docs/importer.md lists the same)
REFUSED: dict[str, str] = {}
IMPORTED = [a for a in ARCHITECTURES if a not in REFUSED]


def training_file(arch: str) -> Path:
    return CORPUS / f"{arch}.training.onnx"


@functools.lru_cache(maxsize=None)
def ort_step(arch: str):
    from monet_ir import import_onnx

    module = import_onnx(training_file(arch))
    module.verify()
    return module


@functools.lru_cache(maxsize=None)
def monet_step(arch: str):
    """MONET's step for the forward export, training what ORT trains."""
    import onnx
    from xdsl.context import Context

    from monet_ir import import_onnx
    from monet_ir.graph import arg_infos, step_function
    from passes.autodiff import AutodiffPass

    trained = {i.name for i in arg_infos(step_function(ort_step(arch))) if i.role == "param" and i.trainable}
    forward = CORPUS / f"{arch}.forward.onnx"
    inits = onnx.load(forward, load_external_data=False).graph.initializer
    frozen = tuple(t.name for t in inits if t.data_type == onnx.TensorProto.FLOAT and t.dims and t.name not in trained)
    module = import_onnx(forward, frozen=frozen)
    AutodiffPass(loss="cross-entropy").apply(Context(), module)
    module.verify()
    return module


def flops(module) -> dict:
    from monet_ir.analysis.accounting import flops_by_phase
    from monet_ir.graph import step_function

    return flops_by_phase(step_function(module))


def trained_elements(module) -> int:
    import math

    from monet_ir.graph import arg_infos, step_function

    fn = step_function(module)
    args = fn.body.block.args
    return sum(math.prod(args[i.index].type.get_shape()) for i in arg_infos(fn) if i.role == "param" and i.trainable)


def test_corpus_is_there_small_and_broad():
    files = sorted(p.name for p in CORPUS.glob("*.onnx"))
    assert sorted(f["file"] for m in MANIFEST["models"] for f in m["files"].values()) == files
    assert len(ARCHITECTURES) >= 10
    assert {m["opset"] for m in MANIFEST["models"]} >= {14, 15, 16, 17}
    assert sum(p.stat().st_size for p in CORPUS.iterdir()) < 3e6
    # what ORT itself cannot build is recorded with its reason
    assert any("HardSwish" in f["reason"] for f in MANIFEST["failed"])


@pytest.mark.parametrize("arch", IMPORTED)
def test_training_graph_reports_as_imported(arch):
    from monet_ir.tools.monet import Progress, build_parser, make_report

    args = build_parser().parse_args(["report", str(training_file(arch)), "--target", TARGET, "--out", "unused",
                                      "--no-plots"])
    report, _ = make_report(args, Progress(enabled=False))
    assert report["pipeline"] == "as imported"
    assert report["latency_cycles"] > 0
    assert report["ops"]["backward"] > 0
    assert report["flops"] == {phase: dict(v) for phase, v in flops(ort_step(arch)).items()}


@pytest.mark.parametrize("arch", IMPORTED)
def test_forward_flops_match_the_forward_export(arch):
    ort, ours = flops(ort_step(arch))["forward"], flops(monet_step(arch))["forward"]
    assert ort["matmul_conv"] == ours["matmul_conv"] > 0
    # equal, or fewer where ORT fused a decomposed LayerNorm or RMSNorm into one op
    assert 0.7 * ours["other"] <= ort["other"] <= ours["other"]


@pytest.mark.parametrize("arch", IMPORTED)
def test_backward_flops_close_to_autodiff(arch):
    ort_module = ort_step(arch)
    ort, ours = flops(ort_module)["backward"], flops(monet_step(arch))["backward"]
    assert ort["matmul_conv"] == ours["matmul_conv"] > 0
    accumulation = trained_elements(ort_module)  # ORT adds each gradient into its buffer
    assert ort["other"] >= accumulation
    print(f"{arch}: backward other ORT {ort['other']} (accumulation {accumulation}) autodiff {ours['other']}")
    assert 0.7 * ours["other"] <= ort["other"] - accumulation <= 1.5 * ours["other"]


@pytest.mark.parametrize("arch", sorted(REFUSED))
def test_refused_training_graph_fails_in_one_line(arch):
    from monet_ir import import_onnx
    from monet_ir.errors import MonetError

    with pytest.raises(MonetError) as info:
        import_onnx(training_file(arch))
    lines = str(info.value).splitlines()
    assert REFUSED[arch] in lines[0]
    assert lines[0].startswith(f"{training_file(arch)}: node '")
    assert len(lines) <= 2  # the forward op and its gradient, nothing downstream


@pytest.mark.parametrize("name", sorted(p.name for p in CORPUS.glob("*.optimizer.onnx")))
def test_optimizer_graph_is_refused_naming_its_sequence_inputs(name):
    from monet_ir import import_onnx
    from monet_ir.errors import MonetError

    with pytest.raises(MonetError) as info:
        import_onnx(CORPUS / name)
    lines = str(info.value).splitlines()
    assert lines and all("is a sequence of tensors, whose shapes the file does not give" in line for line in lines)
    assert any(f"input 'params'" in line for line in lines)


def test_mutated_training_graphs_never_give_a_traceback(tmp_path):
    """Seeded mutations of the ORT training graphs (as test_fuzz_inputs does, plus a dropped
    attribute: ONNX's checker knows no com.microsoft schema, so the converters check theirs)."""
    import random

    import onnx

    from monet_ir.tools.monet_opt import main as monet_opt
    from test_fuzz_inputs import check, mutate, run_tool

    files = sorted(CORPUS.glob("*.training.onnx"))
    rng = random.Random(11)
    outcomes = {0: 0, 1: 0}
    for i in range(60):
        source = files[rng.randrange(len(files))]
        kind = ("truncate", "flip", "drop_node", "rename_input", "drop_attribute")[i % 5]
        data = source.read_bytes()
        if kind == "drop_attribute":
            model = onnx.ModelProto()
            model.ParseFromString(data)
            nodes = [n for n in model.graph.node if n.domain == "com.microsoft" and len(n.attribute)]
            node = nodes[rng.randrange(len(nodes))]
            del node.attribute[rng.randrange(len(node.attribute))]
            data = model.SerializeToString()
        else:
            data = mutate(data, kind, rng)
        mutated = tmp_path / f"case{i}_{kind}_{source.name}"
        mutated.write_bytes(data)
        code, stderr = run_tool(monet_opt, [str(mutated)])
        check("monet-opt", code, stderr, f"case {i}: {kind} of {source.name}")
        outcomes[code] += 1
    assert outcomes[0] > 0 and outcomes[1] > 0, outcomes
