"""Optimizer-step reference kernels: pure functions returning new values.

Each returns a tuple (new_param, new_state...) in the parameter's dtype;
updating buffers in place is the caller's business.

Conventions versus ONNX `ai.onnx.preview.training` (onnx.reference oracles):

* momentum: ONNX Momentum(alpha=momentum, beta=1, norm_coefficient=weight_decay,
  mode standard|nesterov) with a zero initial buffer equals PyTorch SGD with
  dampening=0.  ONNX's `beta` (gradient coefficient after the first step) is
  PyTorch's 1 - dampening.
* adam: ONNX Adam adds epsilon to sqrt(v) *before* folding the bias
  corrections into the step size, so ONNX(epsilon=e) equals PyTorch Adam with
  eps = e / sqrt(1 - beta2**t); they coincide exactly only for eps = 0.
  ONNX's norm_coefficient is Adam's L2 weight_decay; its norm_coefficient_post
  scales the *updated* parameter by (1 - c), which is not AdamW's decoupled
  decay (AdamW scales the old parameter by 1 - lr*weight_decay).
* adagrad: identical to ONNX Adagrad; `step` is ONNX's T (number of previous
  updates, 0 on the first), i.e. PyTorch's state step - 1.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["sgd", "momentum", "adam", "adamw", "adagrad"]


def _out(a, like):
    return np.asarray(a).astype(np.asarray(like).dtype, copy=False)


def sgd(p, g, *, lr, weight_decay=0.0):
    """Plain SGD (torch.optim.SGD, momentum=0) -> (new_p,); L2 decay added to the gradient."""
    p = np.asarray(p)
    if weight_decay:
        g = g + weight_decay * p
    return (_out(p - lr * g, p),)


def momentum(p, g, v, *, lr, momentum, weight_decay=0.0, nesterov=False, dampening=0.0):
    """SGD with momentum, torch.optim.SGD semantics -> (new_p, new_v).

    v_new = momentum*v + (1-dampening)*g, except on the first step (v is None)
    where v_new = g.  Nesterov steps along g + momentum*v_new.  With
    dampening=0 a zero-initialised v gives the same first step as v=None.
    """
    p = np.asarray(p)
    if weight_decay:
        g = g + weight_decay * p
    v_new = np.array(g, copy=True) if v is None else momentum * v + (1.0 - dampening) * g
    direction = g + momentum * v_new if nesterov else v_new
    return _out(p - lr * direction, p), _out(v_new, p)


def adam(p, g, m, v, *, step, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=0.0):
    """Adam, torch.optim.Adam semantics -> (new_p, new_m, new_v).

    `step` is the 1-based index of this update (bias corrections 1 - beta**step);
    weight_decay is L2: weight_decay*p is added to the gradient.
    """
    p = np.asarray(p)
    if weight_decay:
        g = g + weight_decay * p
    return _adam_update(p, g, m, v, step, lr, beta1, beta2, eps)


def adamw(p, g, m, v, *, step, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8, weight_decay=1e-2):
    """AdamW, torch.optim.AdamW semantics -> (new_p, new_m, new_v).

    Decoupled decay: p is first scaled by 1 - lr*weight_decay, then the plain
    Adam step (no L2 term in the moments) is applied.
    """
    p = np.asarray(p)
    decayed = p * (1.0 - lr * weight_decay)
    return _adam_update(decayed, g, m, v, step, lr, beta1, beta2, eps, like=p)


def _adam_update(p, g, m, v, step, lr, beta1, beta2, eps, like=None):
    like = p if like is None else like
    m_new = beta1 * m + (1.0 - beta1) * g
    v_new = beta2 * v + (1.0 - beta2) * (g * g)
    bc1 = 1.0 - beta1 ** int(step)
    bc2_sqrt = math.sqrt(1.0 - beta2 ** int(step))
    # Same association as PyTorch's single-tensor Adam, so float32 runs match it closely.
    denom = np.sqrt(v_new) / bc2_sqrt + eps
    p_new = p - (lr / bc1) * (m_new / denom)
    return _out(p_new, like), _out(m_new, like), _out(v_new, like)


def adagrad(p, g, h, *, step, lr, decay_factor=0.0, epsilon=1e-10, weight_decay=0.0):
    """Adagrad as ONNX ai.onnx.preview.training Adagrad -> (new_p, new_h).

    lr_t = lr / (1 + step*decay_factor); g' = g + weight_decay*p;
    h_new = h + g'^2; p_new = p - lr_t * g' / (sqrt(h_new) + epsilon).
    """
    p = np.asarray(p)
    lr_t = lr / (1.0 + int(step) * decay_factor)
    if weight_decay:
        g = g + weight_decay * p
    h_new = h + g * g
    p_new = p - lr_t * g / (np.sqrt(h_new) + epsilon)
    return _out(p_new, p), _out(h_new, p)
