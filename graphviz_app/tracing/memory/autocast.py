"""Autocast on `meta` tensors, which torch.autocast leaves alone: the same casts, made by a torch-function mode.

torch's autocast casts the inputs of listed ops (matmuls and convolutions to the
lower precision; softmax, norms, losses and some pointwise ops to float32 on CUDA)
at the dispatcher, for tensors of its device only. A forecast runs on `meta`, so
this mode makes the same casts itself, with `Tensor.to`, which autograd records
(ToCopyBackward0) as it records autocast's. It sees the functions the model calls
(`F.linear`, `torch.matmul`, `Tensor.softmax`, `F.multi_head_attention_forward`),
not the ops they call inside: a function calling a listed op inside it is listed
itself (multi-head attention runs its projections and attention in the lower
precision). Op lists: torch's `aten/src/ATen/autocast_mode.cpp`, for the CPU and
the CUDA policy. On the CPU an LSTM is not cast as a whole: torch runs it as oneDNN
layers and autocast casts each layer's arguments (`rnn.fused_lstm`); where it does
not run fused (projections), the LSTM is cast as a whole here, an approximation.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack

from ..torch_internals import view_base
from .rnn import fused_lstm, meta_lstm

__all__ = ["MetaAutocast", "POLICIES", "recompute_autocast"]

_LOWER_BOTH = frozenset({
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "conv_tbc",
    "bmm", "mm", "baddbmm", "addmm", "addbmm", "linear", "matmul", "__matmul__", "__rmatmul__", "prelu",
    "scaled_dot_product_attention", "linalg_vecdot", "multi_head_attention_forward", "einsum",
    "lstm", "gru", "rnn_tanh", "rnn_relu",
})
_LOWER_CUDA = _LOWER_BOTH | frozenset({
    "addmv", "addr", "mv", "chain_matmul", "multi_dot", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
})
_FP32_LOSSES = frozenset({
    "mse_loss", "nll_loss", "cross_entropy", "smooth_l1_loss", "l1_loss", "huber_loss", "kl_div",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "margin_ranking_loss", "poisson_nll_loss",
    "cosine_embedding_loss", "hinge_embedding_loss", "soft_margin_loss", "triplet_margin_loss",
    "multi_margin_loss", "multilabel_margin_loss", "ctc_loss", "cdist",
})
_FP32_CPU = _FP32_LOSSES | frozenset({
    "prod", "avg_pool3d", "max_pool3d", "adaptive_avg_pool3d", "grid_sample", "stft", "quantile", "nanquantile",
})
_FP32_CUDA = _FP32_LOSSES | frozenset({
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
    "sinh", "tan", "pow", "__pow__", "softplus", "layer_norm", "group_norm", "cosine_similarity", "dist", "pdist",
    "renorm", "logsumexp", "norm",
})
# Float32 through their dtype argument, without a copy of the input (CUDA's fp32_set_opt_dtype).
_FP32_DTYPE_CUDA = frozenset({"softmax", "log_softmax", "cumsum", "cumprod", "sum", "prod"})

# device type -> (lower precision ops, float32 ops, float32-by-dtype ops)
POLICIES: dict[str, tuple[frozenset[str], frozenset[str], frozenset[str]]] = {
    "cpu": (_LOWER_BOTH, _FP32_CPU, frozenset()),
    "cuda": (_LOWER_CUDA, _FP32_CUDA, _FP32_DTYPE_CUDA),
}


def _eligible(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype is not torch.float64


class MetaAutocast(TorchFunctionMode):
    """Inside it, the listed functions run as under `torch.autocast(policy, dtype)`, on tensors of any device.

    Lower-precision casts of float32 leaf tensors that require grad (parameters)
    are made once per mode, as autocast caches them.
    """

    def __init__(self, dtype: torch.dtype, policy: str = "cuda") -> None:
        super().__init__()
        if policy not in POLICIES:
            raise ValueError(f"autocast policy must be one of {', '.join(POLICIES)}, got {policy!r}")
        self.dtype, self.policy = dtype, policy
        self.lower, self.fp32, self.fp32_dtype = POLICIES[policy]
        self._cache: dict[int, tuple[weakref.ref[torch.Tensor], torch.Tensor]] = {}

    def _cast(self, value: Any, dtype: torch.dtype) -> Any:
        if isinstance(value, (list, tuple)):
            return type(value)(self._cast(v, dtype) for v in value)
        if not _eligible(value) or value.dtype == dtype:
            return value
        cacheable = (dtype == self.dtype and value.dtype == torch.float32 and value.requires_grad
                     and value.is_leaf and view_base(value) is None)
        if not cacheable:
            return value.to(dtype)
        hit = self._cache.get(id(value))
        if hit is not None and hit[0]() is value:
            return hit[1]
        cast = value.to(dtype)
        self._cache[id(value)] = (weakref.ref(value), cast)
        return cast

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        if func is torch.lstm and self.policy == "cpu" and not kwargs:
            # CPU autocast casts no LSTM: it casts each fused layer's arguments (mkldnn_rnn_layer), layer by layer.
            out = fused_lstm(args, autocast=self.dtype, cast=lambda t: self._cast(t, self.dtype))
            if out is not None:
                return out
        name = getattr(func, "__name__", "")
        to = self.dtype if name in self.lower else torch.float32 if name in self.fp32 else None
        if to is not None:
            args, kwargs = self._cast(tuple(args), to), {k: self._cast(v, to) for k, v in kwargs.items()}
        elif name in self.fp32_dtype and kwargs.get("dtype") is None and any(
                _eligible(a) and a.dtype != torch.float32 for a in args):
            kwargs["dtype"] = torch.float32
        return func(*args, **kwargs)


def recompute_autocast() -> tuple[contextlib.AbstractContextManager[Any], contextlib.AbstractContextManager[Any]]:
    """A `context_fn` for non-reentrant `torch.utils.checkpoint`: the recompute in backward runs under the
    `MetaAutocast` and the `meta_lstm` the forward ran under (torch restores its own autocast there, not a
    mode), so a checkpointed block on meta recomputes the tensors it saved in the same dtypes, an LSTM in it as
    the CPU's fused layers again."""
    # Fresh modes, outermost first as the forward entered them: the forward's MetaAutocast is not kept (its cache
    # holds the forward's casts, which torch's autocast drops as the forward ends).
    fresh: list[TorchFunctionMode] = [
        MetaAutocast(m.dtype, m.policy) if isinstance(m, MetaAutocast) else meta_lstm(m.policy)
        for m in _get_current_function_mode_stack() if isinstance(m, (meta_lstm, MetaAutocast))]
    if not fresh:
        return contextlib.nullcontext(), contextlib.nullcontext()
    return contextlib.nullcontext(), _entered(fresh)


@contextlib.contextmanager
def _entered(modes: list[TorchFunctionMode]) -> Iterator[None]:
    """`modes` entered in order when the recompute starts."""
    with contextlib.ExitStack() as stack:
        for mode in modes:
            stack.enter_context(mode)
        yield
