"""The export corpus (tests/data/corpus, made by its export_corpus.py from torchvision and
transformers with both PyTorch exporters at opsets 13..18): every model imports, `autodiff` and
`insert-optimizer` (Adam) give IR that verifies, and `monet report` on a built-in target
succeeds. The models MONET cannot support are listed in UNSUPPORTED (and in docs/importer.md) with
the reason; each must fail with a one-line input error, and at least 90 % of the corpus must pass.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpus"
MODELS = sorted(p.name for p in CORPUS.glob("*.onnx"))
TARGET = "edge_npu"

# file -> what its one-line error says (docs/importer.md lists the same models and reasons)
UNSUPPORTED: dict[str, str] = {}


def report_args(model: Path) -> argparse.Namespace:
    from monet_ir.tools.monet import build_parser

    return build_parser().parse_args(["report", str(model), "--target", TARGET, "--out", "unused", "--no-plots"])


def train_step(model: Path):
    """Import, autodiff (cross-entropy), insert-optimizer (Adam), verify."""
    from xdsl.context import Context

    from monet_ir import import_onnx
    from passes.autodiff import AutodiffPass
    from passes.insert_optimizer import InsertOptimizerPass

    module = import_onnx(model)
    module.verify()
    AutodiffPass().apply(Context(), module)
    InsertOptimizerPass(kind="adam").apply(Context(), module)
    module.verify()
    return module


def run_model(model: Path) -> dict:
    from monet_ir.tools.monet import Progress, make_report

    module = train_step(model)
    assert any(op.name == "train.adam" for op in module.walk()), "no parameter is trained"
    report, _ = make_report(report_args(model), Progress(enabled=False))
    return report


def test_corpus_is_there_and_broad():
    manifest = json.loads((CORPUS / "manifest.json").read_text())
    assert sorted(m["file"] for m in manifest["models"]) == MODELS
    architectures = {m["architecture"] for m in manifest["models"]}
    assert len(architectures) >= 25
    assert {m["exporter"] for m in manifest["models"]} == {"torchscript", "dynamo"}
    assert {m["opset"] for m in manifest["models"]} >= {13, 14, 15, 16, 17, 18}
    assert sum(p.stat().st_size for p in CORPUS.iterdir()) < 15e6


# architectures whose PyTorch FLOP count (manifest.json's torch_forward_flops) is not MONET's model
FLOPS_NOT_COMPARABLE = {
    "lstm": "FlopCounterMode has no formula for aten::lstm (it counts the head only)",
    "gru": "PyTorch multiplies the zero initial state by R at the first step; the unrolled cell skips it",
}


@pytest.mark.parametrize("name", [m for m in MODELS if m not in UNSUPPORTED])
def test_corpus_model_trains_and_reports(name):
    report = run_model(CORPUS / name)
    assert report["latency_cycles"] > 0
    assert report["ops"]["backward"] > 0 and report["ops"]["optimizer"] > 0
    entry = next(m for m in json.loads((CORPUS / "manifest.json").read_text())["models"] if m["file"] == name)
    if "torch_forward_flops" in entry and entry["architecture"] not in FLOPS_NOT_COMPARABLE:
        assert report["flops"]["forward"]["matmul_conv"] == entry["torch_forward_flops"]


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_unsupported_corpus_model_fails_in_one_line(name):
    from monet_ir.errors import MonetError

    with pytest.raises(MonetError) as info:
        run_model(CORPUS / name)
    message = str(info.value).splitlines()[0]
    assert UNSUPPORTED[name] in message
    assert name in message


def test_coverage_is_at_least_90_percent():
    assert (len(MODELS) - len(UNSUPPORTED)) / len(MODELS) >= 0.9
