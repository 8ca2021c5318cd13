"""Reports and fronts stay byte-identical: SHA-256 digests of `report.json`, `layers.csv`,
`report.txt` and `trace.json` for a fixed set of (model, target, options), and of a small
`monet explore`'s `front.json` and `evaluated.csv`, recorded in tests/data/report_digests.json.

Speed work (cost cache, lazy imports, scheduler layout) must not move a byte of these. A change
that alters reports on purpose re-records them and says so in its commit:

    python tests/unit/test_report_digests.py --record

(bench/bench_digests.py checks a larger set, GPT-2 and ResNet-18 at larger batches, the same way.)
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
DIGESTS = DATA / "report_digests.json"
MLP = "tests/data/models/mlp_b4.onnx"
LENET = "tests/data/models/lenet5_b4.onnx"
RESNET = "examples/models/resnet18_b1.onnx"
ORT_GPT2 = "tests/data/ort/gpt2like_training.onnx"
STREAM_TPU = "tests/data/stream_hw/tpu_like_quad_core.yaml"
ZIGZAG_GEMM = "tests/data/zigzag_hw/gemm_l1.yaml"

# (case id, model, target, extra options): every built-in target, a Stream system file and a
# ZigZag core file; fusion, checkpointing, both, inference, a precision and an imported training graph
REPORTS = [
    ("mlp-tpu", MLP, "tpu_like_quad_core", []),
    ("mlp-datacenter-recompute", MLP, "datacenter", ["--checkpoint", "recompute-all"]),
    ("lenet-edge-fusion", LENET, "edge_npu", ["--fusion", "auto"]),
    ("lenet-hetero-sqrt", LENET, "hetero_chip", ["--checkpoint", "sqrt", "--optimizer", "sgd"]),
    ("lenet-tpu-fusion-sqrt-tiles", LENET, "tpu_like_quad_core", ["--fusion", "auto", "--checkpoint", "sqrt",
                                                                  "--tiles", "4"]),
    ("lenet-zigzag-inference", LENET, ZIGZAG_GEMM, ["--inference"]),
    ("resnet18-tpu", RESNET, "tpu_like_quad_core", []),
    ("resnet18-edge-fusion-bf16", RESNET, "edge_npu", ["--fusion", "auto", "--precision", "bf16"]),
    ("ort-gpt2like-stream", ORT_GPT2, STREAM_TPU, []),
    ("lenet-cortex-a-plan-page-recompute", LENET, "cortex_a_board",
     ["--checkpoint", "plan=tests/data/plans/lenet5_b4_page_recompute.json"]),
]
REPORT_FILES = ("report.json", "layers.csv", "report.txt", "trace.json")

EXPLORE = ("explore-lenet-tpu", LENET, "tpu_like_quad_core",
           ["--population", "6", "--generations", "2", "--jobs", "1", "--seed", "1"])
EXPLORE_FILES = ("front.json", "evaluated.csv")


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run(command: str, model: str, target: str, options: list[str], out: Path) -> None:
    import contextlib
    import io
    import os

    from monet_ir.tools.monet import main

    cwd = os.getcwd()
    os.chdir(REPO)  # reports name the model as given; keep paths relative to the repository
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                pytest.raises(SystemExit) as exit_:
            main([command, model, "--target", target, "--out", str(out), "--no-plots", *options])
    finally:
        os.chdir(cwd)
    assert exit_.value.code == 0, f"monet {command} {model} --target {target} {options} exited {exit_.value.code}"


def digests_of(case: tuple, files: tuple[str, ...], command: str, out: Path) -> dict[str, str]:
    _, model, target, options = case
    _run(command, model, target, options, out)
    return {name: _digest(out / name) for name in files}


def _recorded() -> dict[str, dict[str, str]]:
    return json.loads(DIGESTS.read_text())


@pytest.mark.parametrize("case", REPORTS, ids=[c[0] for c in REPORTS])
def test_report_bytes_unchanged(case, tmp_path):
    expected = _recorded()[case[0]]
    got = digests_of(case, REPORT_FILES, "report", tmp_path)
    changed = [name for name in REPORT_FILES if got[name] != expected[name]]
    assert not changed, (f"{case[0]}: {', '.join(changed)} changed; if on purpose, re-record with "
                         "`python tests/unit/test_report_digests.py --record`")


def test_explore_front_bytes_unchanged(tmp_path):
    expected = _recorded()[EXPLORE[0]]
    got = digests_of(EXPLORE, EXPLORE_FILES, "explore", tmp_path)
    changed = [name for name in EXPLORE_FILES if got[name] != expected[name]]
    assert not changed, (f"{EXPLORE[0]}: {', '.join(changed)} changed; if on purpose, re-record with "
                         "`python tests/unit/test_report_digests.py --record`")


def record() -> None:
    import tempfile

    result: dict[str, dict[str, str]] = {}
    for case in REPORTS:
        with tempfile.TemporaryDirectory() as out:
            result[case[0]] = digests_of(case, REPORT_FILES, "report", Path(out))
    with tempfile.TemporaryDirectory() as out:
        result[EXPLORE[0]] = digests_of(EXPLORE, EXPLORE_FILES, "explore", Path(out))
    DIGESTS.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(result)} cases in {DIGESTS}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python tests/unit/test_report_digests.py --record")
    record()
