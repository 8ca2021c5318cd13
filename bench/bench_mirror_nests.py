"""Benchmark (not a test): the mirror-nest check (`monet_ir.cost.mirror`) on the whole corpus.

For every Conv/Gemm/MatMul of the export corpus (tests/data/corpus) and of ../shared's models,
its forward, input-gradient and weight-gradient nests are priced on the MAC-array core of each
target below; a layer whose three nests are more than 2x apart in cycles must be explained by
the spatial units the core's dataflow gives each, or by operand sizes. Prints per target the
layers checked, within 2x, explained and unexplained (each unexplained one listed), and exits 1
when any is unexplained. tests/unit/test_mirror_nests.py runs the same check on a small corpus.

Usage: python bench/bench_mirror_nests.py [--targets NAME|FILE ...] [--precision int8|bf16]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from shared_path import SHARED

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
TARGETS = [str(DATA / "stream_hw" / "fusemax.yaml"), "edge_npu", "tpu_like_quad_core", "datacenter",
           str(DATA / "zigzag_hw" / "tpu_like.yaml"), str(DATA / "zigzag_hw" / "eyeriss_like.yaml")]
BITS = {"int8": (8, 8, 8, 16), "bf16": (16, 16, 16, 16)}


def corpus_layers(bits: tuple[int, int, int, int]) -> dict:
    """Distinct forward nests of the corpus, with a model and node where each first appears."""
    sys.path.insert(0, str(REPO))
    from monet_ir.cost.onnx_layers import LOOP_NEST_OPS, load_shaped_model, node_sig, tensor_shapes

    models = sorted((DATA / "corpus").glob("*.onnx"))
    if (SHARED / "models").is_dir():
        models += sorted((SHARED / "models").glob("*.onnx"))
    layers: dict = {}
    for path in models:
        try:
            model = load_shaped_model(str(path))
        except Exception as error:  # a model ONNX's own shape inference cannot read
            print(f"  skipped {path.name}: {str(error).splitlines()[0][:80]}")
            continue
        shapes = tensor_shapes(model)
        for node in model.graph.node:
            if node.op_type not in LOOP_NEST_OPS:
                continue
            try:
                sig = node_sig(node, shapes, bits)
            except ValueError:
                continue
            layers.setdefault(sig, f"{path.name}:{node.name or node.output[0]}")
    return layers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", nargs="+", default=TARGETS)
    parser.add_argument("--precision", choices=list(BITS), default="int8")
    args = parser.parse_args()
    from monet_ir.cost.mirror import LIMIT, mirror_check
    from targets import get_target

    layers = corpus_layers(BITS[args.precision])
    print(f"{len(layers)} distinct forward loop nests")
    failed = 0
    for name in args.targets:
        target = get_target(name, precision=args.precision)
        for core in target.cores:
            if core.kind != "mac_array":
                continue
            checked = within = explained = 0
            unexplained = []
            for sig, where in layers.items():
                check = mirror_check(sig, core)
                if check is None:
                    continue
                checked += 1
                if check.ratio <= LIMIT:
                    within += 1
                elif check.explanation:
                    explained += 1
                else:
                    unexplained.append((check, where))
            label = f"{Path(name).name} core {core.id} ({core.name})"
            print(f"{label:50s} {checked:5d} layers: {within:5d} within {LIMIT:g}x, {explained:4d} explained, "
                  f"{len(unexplained):4d} unexplained")
            for check, where in sorted(unexplained, key=lambda c: -c[0].ratio)[:10]:
                cycles = "/".join(f"{c:.0f}" for c in check.cycles)
                print(f"    {check.ratio:6.2f}x  fwd/dx/dw {cycles} cycles, units {check.units}  {where}")
            failed += len(unexplained)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
