"""Memory occupancy in every schedule is never negative and on-chip peaks fit their memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from monet_ir.schedule.scheduler import MemoryTrace
from monet_ir.tools.monet import Progress, build_parser, make_report

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
CASES = [
    (DATA / "models" / "lenet5_b4.onnx", "edge_npu", ()),
    (DATA / "models" / "mlp_b4.onnx", "hetero_chip", ("--fusion", "auto")),
    (REPO / "examples" / "models" / "resnet18_b1.onnx", "tpu_like_quad_core", ()),
    (REPO / "examples" / "models" / "resnet18_b1.onnx", "edge_npu", ("--fusion", "auto", "--checkpoint", "sqrt")),
    (DATA / "ort" / "gpt2like_training.onnx", str(DATA / "stream_hw" / "tpu_like_quad_core.yaml"), ()),
]


def test_a_buffer_freed_when_it_is_allocated_never_dips_below_zero():
    trace = MemoryTrace("m", 100)
    trace.alloc(0.0, 40)
    trace.alloc(5.0, 30)
    trace.free(5.0, 30, allocated_at=5.0)  # produced and dropped at the same instant
    trace.free(5.0, 40, allocated_at=0.0)  # an older buffer freed at that instant
    trace.alloc(5.0, 50)  # takes the older buffer's space
    # at t=5: the old buffer's free, both allocations, then the same-instant free
    assert [level for _, level in trace.timeline()] == [40, 0, 30, 80, 50]
    assert trace.peak() == 80


@pytest.mark.parametrize("model,target,extra", CASES, ids=lambda c: c if isinstance(c, str) else None)
def test_occupancy_is_never_negative_and_fits(model, target, extra, tmp_path):
    args = build_parser().parse_args(["report", str(model), "--target", target, "--out", str(tmp_path), *extra])
    _, sched = make_report(args, Progress(False))
    for name, trace in sched.memories.items():
        levels = [level for _, level in trace.timeline()]
        assert min(levels, default=0) >= 0, f"{name} goes negative"
        if not name.startswith("dram"):
            assert trace.peak() <= trace.capacity, f"{name} exceeds its capacity"
