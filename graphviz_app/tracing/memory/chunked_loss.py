"""A language model's loss computed in chunks over its tokens, so the whole logits tensor never exists.

`chunked_cross_entropy` is the helper a person calls in place of `F.cross_entropy(head(hidden), target)`.
`chunked_head` applies it to an unchanged model for one step: the head `nn.Linear` returns `LazyLogits`,
which keeps the head's input; the ops between the head and the loss (`.float()`, `.view(-1, vocab)`,
slicing off the last position, `.contiguous()`) are applied to that input row by row, and
`F.cross_entropy` on it runs `chunked_cross_entropy`. Any other use of the logits raises
`ChunkedLossError` naming it, so a step is never silently changed into another one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils.checkpoint
from torch.nn import functional as F

from ...analysis.memory.levers import CHUNKS
from ...errors import ChunkedLossError
from ..thread_state import callers_autocast_dtype
from .autocast import recompute_autocast

__all__ = ["chunked_cross_entropy", "chunked_head", "LazyLogits", "CHUNKS"]


class _NoAttribute(ChunkedLossError, AttributeError):
    """An attribute the logits do not have: `hasattr` and `getattr(..., default)` see an AttributeError (a step's
    output probed for `.loss`), a person reading it the reason."""


def _chunk_loss(hidden: torch.Tensor, target: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                logit_bias: torch.Tensor | None, cast: torch.dtype | None, class_weight: torch.Tensor | None,
                ignore_index: int, label_smoothing: float, reduction: str) -> torch.Tensor:
    logits = F.linear(hidden, weight, bias)
    if logit_bias is not None:
        logits = logits + logit_bias
    if cast is not None:
        logits = logits.to(cast)
    return F.cross_entropy(logits, target, weight=class_weight, ignore_index=ignore_index, reduction=reduction,
                           label_smoothing=label_smoothing)


def chunked_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor, target: torch.Tensor, *,
                          bias: torch.Tensor | None = None, chunks: int = CHUNKS, ignore_index: int = -100,
                          reduction: str = "mean", label_smoothing: float = 0.0,
                          class_weight: torch.Tensor | None = None, dtype: torch.dtype | None = None,
                          logit_bias: torch.Tensor | None = None) -> torch.Tensor:
    """`F.cross_entropy(F.linear(hidden, weight, bias), target)` computed `chunks` rows at a time.

    Each chunk's logits are made, reduced and dropped under non-reentrant `torch.utils.checkpoint`, and
    made again in backward, so one chunk's logits (rows / chunks x vocabulary) are alive at a time instead
    of the whole tensor, for one more head matmul per chunk. The value and the gradients are those of the
    unchunked loss (to rounding).

    Args:
        hidden: the head's input, (rows, features); flatten batch and sequence first.
        weight: the head's weight, (vocabulary, features) as `nn.Linear` keeps it (a tied embedding's too).
        target: class indices, (rows,).
        bias: the head's bias, if any.
        chunks: how many chunks of rows (at most `rows`).
        ignore_index, reduction, label_smoothing: as `F.cross_entropy` takes them ("mean", "sum" or "none").
        class_weight: `F.cross_entropy`'s `weight` (one per class).
        dtype: cast each chunk's logits to it before the loss (`logits.float()` under autocast).
        logit_bias: added to each chunk's logits after the head, over the vocabulary (transformers'
            `final_logits_bias`).

    Returns:
        The loss, as `F.cross_entropy` returns it.

    Raises:
        ChunkedLossError: `hidden` is not 2-D, `target` does not have one entry per row, or `chunks`/
            `reduction` is not valid.

    >>> h, w, y = torch.randn(6, 4), torch.randn(10, 4), torch.tensor([1, 2, 3, 4, 5, -100])
    >>> torch.allclose(chunked_cross_entropy(h, w, y, chunks=3), F.cross_entropy(h @ w.T, y))
    True
    """
    if hidden.dim() != 2 or target.dim() != 1 or target.shape[0] != hidden.shape[0]:
        raise ChunkedLossError(
            f"chunked_cross_entropy takes hidden (rows, features) and target (rows,), got {tuple(hidden.shape)} and "
            f"{tuple(target.shape)}: flatten the batch and sequence dimensions first (hidden.flatten(0, -2))")
    if chunks < 1:
        raise ChunkedLossError(f"chunks must be at least 1, got {chunks}")
    if reduction not in ("mean", "sum", "none"):
        raise ChunkedLossError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    part = "none" if reduction == "none" else "sum"
    parts = [torch.utils.checkpoint.checkpoint(_chunk_loss, h, y, weight, bias, logit_bias, dtype, class_weight,
                                               ignore_index, label_smoothing, part, use_reentrant=False,
                                               context_fn=recompute_autocast)
             for h, y in zip(hidden.chunk(chunks), target.chunk(chunks), strict=True)]
    if reduction == "none":
        return torch.cat(parts)
    total = torch.stack(parts).sum()
    if reduction == "sum":
        return total
    valid = target != ignore_index
    count = class_weight[target[valid]].sum() if class_weight is not None else valid.sum()
    return total / count


def _last(dims: int, index: Any) -> bool:
    """Whether an index (as `tensor[index]` takes it) leaves the last of `dims` dimensions whole."""
    items = index if isinstance(index, tuple) else (index,)
    if any(i is None for i in items):
        return False
    if Ellipsis in items:
        return isinstance(items[-1], slice) and items[-1] == slice(None)
    taken = sum(i.dim() if isinstance(i, torch.Tensor) and i.dtype == torch.bool else 1 for i in items)
    return taken < dims or (taken == dims and isinstance(items[-1], slice) and items[-1] == slice(None))


class LazyLogits:
    """The head's output, not computed: its input `hidden` (with the shape ops since applied to it, the last
    dimension the features instead of the vocabulary) and the head. `F.cross_entropy` on it computes the loss
    in chunks (`chunked_cross_entropy`); any other use raises `ChunkedLossError`."""

    def __init__(self, hidden: torch.Tensor, head: torch.nn.Linear, cast: torch.dtype | None = None,
                 calls: list[int] | None = None, logit_bias: torch.Tensor | None = None) -> None:
        self.hidden, self.head, self.cast, self.logit_bias = hidden, head, cast, logit_bias
        self.calls = calls if calls is not None else [0]  # chunked losses computed from these logits

    @property
    def shape(self) -> torch.Size:
        return torch.Size((*self.hidden.shape[:-1], self.head.out_features))

    @property
    def dtype(self) -> torch.dtype:
        return self.cast or callers_autocast_dtype(self.device.type) or self.hidden.dtype

    @property
    def device(self) -> torch.device:
        return self.hidden.device

    @property
    def ndim(self) -> int:
        return self.hidden.dim()

    def dim(self) -> int:
        return self.hidden.dim()

    def size(self, dim: int | None = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def _with(self, hidden: torch.Tensor, cast: torch.dtype | None = None) -> LazyLogits:
        return LazyLogits(hidden, self.head, cast or self.cast, self.calls, self.logit_bias)

    def float(self) -> LazyLogits:
        return self._with(self.hidden, torch.float32)

    def to(self, *args: Any, **kwargs: Any) -> LazyLogits:
        dtype = kwargs.get("dtype", next((a for a in args if isinstance(a, torch.dtype)), None))
        device = kwargs.get("device", next((a for a in args if isinstance(a, (str, torch.device))), None))
        if device is not None and torch.device(device) != self.device:
            raise self._refused(f".to({device!r})")
        return self._with(self.hidden, dtype)

    def contiguous(self, *args: Any, **kwargs: Any) -> LazyLogits:
        return self

    def __add__(self, other: Any) -> LazyLogits:
        """A bias over the vocabulary (every other dimension 1: BART's `final_logits_bias`) is kept for each chunk."""
        vocab = self.head.out_features
        if (not isinstance(other, torch.Tensor) or other.dim() > self.ndim or not other.shape
                or other.shape[-1] != vocab or any(d != 1 for d in other.shape[:-1]) or self.cast is not None):
            raise self._refused("+ a tensor that is not a bias over the vocabulary")
        bias = other.reshape(vocab)
        out = self._with(self.hidden)
        out.logit_bias = bias if self.logit_bias is None else self.logit_bias + bias
        return out

    __radd__ = __add__

    def _rows(self, shape: tuple[int, ...], how: str) -> LazyLogits:
        if not shape or shape[-1] != self.head.out_features:
            raise self._refused(f"{how}{shape}, which does not keep the vocabulary as the last dimension")
        return self._with(self.hidden.reshape(*shape[:-1], self.head.in_features))

    def view(self, *shape: Any) -> LazyLogits:
        dims = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)) else shape
        return self._rows(dims, ".view")

    def reshape(self, *shape: Any) -> LazyLogits:
        dims = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list, torch.Size)) else shape
        return self._rows(dims, ".reshape")

    def flatten(self, start_dim: int = 0, end_dim: int = -1) -> LazyLogits:
        if end_dim % self.ndim == self.ndim - 1:
            raise self._refused(f".flatten({start_dim}, {end_dim}), which folds the vocabulary into the rows")
        return self._with(self.hidden.flatten(start_dim, end_dim))

    def __getitem__(self, index: Any) -> LazyLogits:
        if not _last(self.ndim, index):
            raise self._refused(f"[{index!r}], which indexes the vocabulary dimension")
        return self._with(self.hidden[index])

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        if func is F.cross_entropy:
            return _lazy_cross_entropy(*args, **kwargs)
        if func in (torch.flatten, torch.Tensor.flatten) and isinstance(args[0], LazyLogits):
            return args[0].flatten(*args[1:], **kwargs)
        lazy = next((a for a in args if isinstance(a, LazyLogits)), None)
        if lazy is None:
            raise ChunkedLossError(f"{getattr(func, '__name__', func)} was given the head's logits inside a container")
        raise lazy._refused(getattr(func, "__name__", str(func)))

    def _refused(self, use: str) -> ChunkedLossError:
        return ChunkedLossError(
            f"the head's logits are used by {use}, not only reshaped and passed to F.cross_entropy: the loss "
            "cannot be computed in chunks automatically; compute it by hand with "
            "graphviz_app.memory.chunked_cross_entropy(hidden, head.weight, target)")

    def __getattr__(self, name: str) -> Any:
        raise _NoAttribute(str(self._refused(f"the attribute .{name}")))


def _lazy_cross_entropy(logits: LazyLogits, target: torch.Tensor, weight: torch.Tensor | None = None,
                         size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
                         reduction: str = "mean", label_smoothing: float = 0.0) -> torch.Tensor:
    if size_average is not None or reduce is not None:
        raise logits._refused("F.cross_entropy with the deprecated size_average/reduce")
    if logits.ndim != 2:
        raise logits._refused(f"F.cross_entropy over logits of {logits.ndim} dimensions (the classes not last)")
    head = logits.head
    logits.calls[-1] += 1
    return chunked_cross_entropy(logits.hidden, head.weight, target, bias=head.bias, ignore_index=ignore_index,
                                 reduction=reduction, label_smoothing=label_smoothing, class_weight=weight,
                                 dtype=logits.cast, logit_bias=logits.logit_bias)


@contextlib.contextmanager
def chunked_head(model: torch.nn.Module, head: str, *, chunks: int = CHUNKS) -> Iterator[list[int]]:
    """Inside the block, `model`'s `head` (an `nn.Linear`) returns `LazyLogits`, so the loss `F.cross_entropy`
    computes from them is computed in `chunks` chunks. The list yielded counts, per forward, the chunked losses
    computed (0 means the logits never reached `F.cross_entropy`). The head's forward is put back on the way out.

    Raises:
        ChunkedLossError: `head` is not an `nn.Linear` of the model.

    >>> net = torch.nn.Linear(4, 10)
    >>> with chunked_head(net, "") as calls:
    ...     loss = F.cross_entropy(net(torch.randn(6, 4)), torch.arange(6))
    >>> calls, loss.shape
    ([1], torch.Size([]))
    """
    try:
        module = model.get_submodule(head)
    except AttributeError as e:
        raise ChunkedLossError(f"the loss's head {head!r} is not a module of {type(model).__name__}") from e
    if not isinstance(module, torch.nn.Linear):
        raise ChunkedLossError(f"the logits are made by {head or 'the model'} ({type(module).__name__}), not an "
                               "nn.Linear: compute the loss by hand with chunked_cross_entropy(hidden, weight, target)")
    calls: list[int] = []

    def forward(hidden: torch.Tensor) -> LazyLogits:
        calls.append(0)
        return LazyLogits(hidden, module, calls=calls)

    module.forward = forward  # type: ignore[method-assign,assignment]
    try:
        yield calls
    finally:
        del module.forward
