"""Per-op cost model: pure Python, memoized by (signature, core); no IR inside.

`cost_of(sig, core)` prices a `LoopNestSig` (conv/matmul-like, forward or backward) with a
ZigZag-style loop-nest model, or a `VectorSig` with a lanes/bandwidth model; `can_run` says
whether a core accepts the op.  See docs/targets.md for the equations.
"""

from .model import CostError, cache_info, can_run, clear_cache, cost_of
from .signature import Cost, LoopNestSig, VectorSig

__all__ = ["Cost", "CostError", "LoopNestSig", "VectorSig", "cache_info", "can_run", "clear_cache", "cost_of"]
