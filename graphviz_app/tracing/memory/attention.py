"""Attention on `meta` as the target device runs it: the fused kernel torch would pick there, not the math path.

On `meta`, `F.scaled_dot_product_attention` always takes its math path, which saves
the (batch, heads, length, length) attention weights for backward; on CPU and CUDA
torch picks a fused kernel that saves only the output and a row of log-sum-exps.
A forecast of a transformer on `meta` would then count the weights that the real
step never keeps (+19% on a 4-layer GPT at context 128, more at longer contexts).
`meta_attention` calls the fused kernel the target device would pick, by the rules of
torch's `sdp_utils` (`aten/src/ATen/native/transformers`): on CPU flash attention
unless there is dropout; on CUDA flash attention for float16/bfloat16 without a
mask, else memory-efficient attention; anything else keeps the math path. With
`enable_gqa` (fewer key/value heads than query heads, as transformers' Llama, Qwen2
and Mixtral pass it) the flash kernels take the heads as they are; memory-efficient
attention does not, and the math path repeats them.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Iterator
from typing import Any

import torch
from torch.nn import functional as F
from torch.overrides import handle_torch_function, has_torch_function

from ..torch_internals import fused_attention_ops

__all__ = ["meta_attention", "fused_attention"]

_LOW = (torch.float16, torch.bfloat16)


def _float_mask(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """A boolean mask as the additive float mask torch turns it into (True: attend)."""
    if mask is None or mask.dtype is not torch.bool:
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask.logical_not(), float("-inf"))


def fused_attention(policy: str, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                    attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0, is_causal: bool = False,
                    scale: float | None = None, enable_gqa: bool = False) -> torch.Tensor | None:
    """The fused kernel's output for `F.scaled_dot_product_attention(...)` on the `policy` device ("cpu",
    "cuda"), or None where torch would take the math path there (or the call is one this does not know)."""
    tensors = (query, key, value)
    if any(t.dim() != 4 for t in tensors) or len({t.dtype for t in tensors}) != 1:
        return None
    if len({t.shape[0] for t in tensors}) != 1 or key.shape[1] != value.shape[1]:
        return None  # broadcast batch: the dense kernels need it equal
    # Grouped-query attention (fewer key/value heads): the flash kernels take it as it is, the others do not.
    gqa = query.shape[1] != key.shape[1]
    if gqa and not (enable_gqa and key.shape[1] and query.shape[1] % key.shape[1] == 0):
        return None
    if len({t.shape[-1] for t in tensors}) != 1 or any(t.stride(-1) != 1 for t in tensors):
        return None
    if attn_mask is not None and attn_mask.dim() not in (2, 4):
        return None
    dtype, head = query.dtype, query.shape[-1]
    flash_cpu, flash_cuda, efficient = fused_attention_ops()
    if policy == "cpu":
        if dropout_p > 0.0 or dtype not in (torch.float32, torch.float64, *_LOW):
            return None
        mask = _float_mask(attn_mask, dtype)
        return flash_cpu(
            query, key, value, dropout_p, is_causal, attn_mask=mask, scale=scale)[0]
    if policy != "cuda":
        return None
    if attn_mask is None and dtype in _LOW and head <= 256 and head % 8 == 0:
        return flash_cuda(
            query, key, value, dropout_p, is_causal, False, scale=scale)[0]
    if gqa:  # memory-efficient attention takes no grouped heads: torch's math path repeats them
        return None
    if dtype in (torch.float32, *_LOW) and head % (4 if dtype is torch.float32 else 8) == 0:
        mask = _float_mask(attn_mask, dtype)
        if mask is not None:
            b, h, n, s = query.shape[0], query.shape[1], query.shape[2], key.shape[2]
            mask = mask.expand(b, h, n, s)
        needs_grad = any(t.requires_grad for t in tensors)
        return efficient(
            query, key, value, mask, needs_grad, dropout_p, is_causal, scale=scale)[0]
    return None


_POLICY: contextvars.ContextVar[str | None] = contextvars.ContextVar("meta_attention_policy", default=None)
_ORIGINAL = F.scaled_dot_product_attention
_LOCK = threading.Lock()
_ACTIVE = [0]


def _sdpa(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0, is_causal: bool = False,
          scale: float | None = None, enable_gqa: bool = False) -> Any:
    """`F.scaled_dot_product_attention` while a `meta_attention` block is open anywhere: the fused kernel for
    meta tensors of this thread's block, torch's own function for everything else."""
    tensors = (query, key, value)
    if has_torch_function(tensors):  # function modes (autocast on meta) see this call as they see torch's
        return handle_torch_function(_sdpa, tensors, query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                     is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
    policy = _POLICY.get()
    if policy is not None and all(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in tensors):
        try:
            out = fused_attention(policy, query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa)
        except (RuntimeError, TypeError, ValueError, NotImplementedError):
            out = None  # a call the fused kernel refuses: the math path, as torch would fall back
        if out is not None:
            return out
    return _ORIGINAL(query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa)


_sdpa.__name__ = _sdpa.__qualname__ = "scaled_dot_product_attention"


@contextlib.contextmanager
def meta_attention(policy: str = "cuda") -> Iterator[None]:
    """Inside the block, attention on meta tensors (this thread's) runs the fused kernel the `policy` device
    ("cpu", "cuda") would pick (`fused_attention`).

    `torch.nn.functional.scaled_dot_product_attention` is replaced while any block is
    open: multi-head attention calls it from inside its own function, where no
    torch-function mode sees the call. The replacement hands every other call to
    torch's function unchanged.

    >>> q = torch.empty(1, 2, 8, 4, device="meta", requires_grad=True)
    >>> with meta_attention("cpu"):
    ...     F.scaled_dot_product_attention(q, q, q).grad_fn.name()
    'ScaledDotProductFlashAttentionForCpuBackward0'
    """
    token = _POLICY.set(policy)
    with _LOCK:
        _ACTIVE[0] += 1
        F.scaled_dot_product_attention = _sdpa
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE[0] -= 1
            if _ACTIVE[0] == 0:
                F.scaled_dot_product_attention = _ORIGINAL
        _POLICY.reset(token)
