"""NumPy reference kernels for MONET's numeric interpreter and autodiff tests.

Forward kernels implement ONNX (opset 17/18) semantics; backward kernels
implement the per-op rules of training-semantics.md §2 (the ONNX Runtime
gradient builder, cross-checked with PyTorch's derivatives.yaml) and take the
tensors that rule saves.  Optimizer steps follow torch.optim / ONNX
ai.onnx.preview.training.

Conventions
-----------
* Pure functions on NumPy arrays, no global state; ONNX attributes are
  keyword arguments named in snake_case (``trans_a``, ``count_include_pad``);
  ONNX optional *inputs* are positional (``clip(x, min, max)``).
* Floating outputs keep the input dtype (float32 in, float32 out).
* Backward functions are named ``<op>_grad`` (returning a tuple over the
  differentiable inputs, documented per function) or ``<op>_grad_<operand>``.
  Gradients of broadcasting operands are already reduced to the operand's
  shape (see `reduce_to_shape`).

The implementation is split by topic into ``kernels_*.py`` modules; import
everything from here, preferably as a module (``from monet_ir.interp import
kernels as K``): a star import would shadow the builtins ``sum``, ``pow`` and
``slice`` with the ONNX kernels of the same name.
"""

from __future__ import annotations

from . import (kernels_common, kernels_conv, kernels_elementwise, kernels_linalg,
               kernels_nn, kernels_optim, kernels_shape)
from .kernels_common import *  # noqa: F401,F403
from .kernels_conv import *  # noqa: F401,F403
from .kernels_elementwise import *  # noqa: F401,F403
from .kernels_linalg import *  # noqa: F401,F403
from .kernels_nn import *  # noqa: F401,F403
from .kernels_optim import *  # noqa: F401,F403
from .kernels_shape import *  # noqa: F401,F403

__all__ = sorted(set(
    kernels_common.__all__ + kernels_conv.__all__ + kernels_elementwise.__all__
    + kernels_linalg.__all__ + kernels_nn.__all__ + kernels_optim.__all__
    + kernels_shape.__all__
))

#: Backward of Flatten, Squeeze and Unsqueeze is the plain reshape back.
flatten_grad = squeeze_grad = unsqueeze_grad = reshape_grad
__all__ += ["flatten_grad", "squeeze_grad", "unsqueeze_grad"]
