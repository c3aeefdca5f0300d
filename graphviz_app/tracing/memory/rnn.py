"""An LSTM on `meta` as the CPU runs it: oneDNN's fused layer kernel, with the workspace it saves sized.

On `meta`, `nn.LSTM` takes torch's step-by-step cell (a matmul, a split and five
pointwise ops per time step, each saving its inputs); on the CPU torch runs one
oneDNN kernel per layer (`mkldnn_rnn_layer`), in float32, or in bfloat16 under
bfloat16 autocast where the CPU has oneDNN's bfloat16 kernels. Its backward keeps
the layer's input and output, its states and a uint8 workspace that oneDNN lays
out itself. `meta_lstm` makes meta take the fused path; torch's meta kernel
returns the workspace empty, and it is made there as large as the CPU kernel makes
it (`lstm_workspace_bytes`, from oneDNN's own layout) before autograd saves it, so a
count on meta holds it from the layer's forward to its backward, as on the CPU.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ..torch_internals import TorchDispatchMode, mkldnn_bf16_supported

__all__ = ["meta_lstm", "fused_lstm", "lstm_workspace_bytes", "fused_lstm_dtypes", "FUSED_LSTM_NODE",
           "WORKSPACE_NAME"]

FUSED_LSTM_NODE = "MkldnnRnnLayerBackward0"
WORKSPACE_NAME = "result3"  # the fourth output of mkldnn_rnn_layer, saved for its backward
_LSTM_MODE = 2  # the cuDNN-style mode number torch passes for an LSTM
_PAGE = 4096  # oneDNN starts each part of the workspace on a page (rnn_utils.cpp, set_offsets)
_ACCUMULATOR = 4  # the diff-state parts are float32 (gemm_acc_t) in every supported precision
_SIZES = {torch.float32: 4, torch.bfloat16: 2}


def _page(n: int) -> int:
    return -(-n // _PAGE) * _PAGE


def _good_ld(dim: int, size: int) -> int:
    """oneDNN's `get_good_ld`: a row of `dim` elements of `size` bytes padded to 64 bytes, and 64 more
    when the padded count is a multiple of 256 (to avoid 4 KiB aliasing)."""
    per_line = 64 // size
    ld = -(-dim // per_line) * per_line
    return ld + per_line if ld % 256 == 0 else ld


def fused_lstm_dtypes() -> tuple[torch.dtype, ...]:
    """The dtypes torch's CPU LSTM runs oneDNN's fused layer kernel in for training on this machine: float32
    with oneDNN, and bfloat16 where oneDNN has bfloat16 kernels (`mkldnn_bf16_device_check`: AVX-512 or
    AVX2-VNNI-2); none without oneDNN (torch then runs its step-by-step cell)."""
    if not torch.backends.mkldnn.is_available():
        return ()
    return (torch.float32, torch.bfloat16) if mkldnn_bf16_supported() else (torch.float32,)


def lstm_workspace_bytes(steps: int, batch: int, input_size: int, hidden: int,
                         dtype: torch.dtype = torch.float32) -> int:
    """Bytes of the workspace the CPU's fused LSTM layer (oneDNN, one layer, one direction, training) saves for
    backward, when it runs in `dtype` (float32, or bfloat16 under autocast).

    oneDNN's layout (`set_workspace_sizes` in src/cpu/rnn/rnn_utils.hpp, v3.12, which torch 2.13 bundles):
    the gates of every step and the hidden outputs in `dtype`; the layer and cell states over
    steps + 1 and two layers' worth of rows (`n_layer + 1`), in `dtype`; the layer, iteration and cell
    state gradients there in float32; each part on its own 4 KiB page, rows padded by `get_good_ld`
    (the cell parts are not padded). Checked against torch 2.13's CPU kernel to the byte on 59 shapes
    in each dtype (1 to 64 steps and rows, sizes 1 to 1000).

    >>> lstm_workspace_bytes(10, 16, 32, 64)  # torch allocates 667,648 B
    667648
    >>> lstm_workspace_bytes(10, 16, 32, 64, torch.bfloat16)  # torch allocates 475,136 B
    475136

    Raises:
        ValueError: `dtype` is one the fused kernel does not train in.
    """
    size = _SIZES.get(dtype)
    if size is None:
        raise ValueError(f"the CPU's fused LSTM kernel trains in float32 or bfloat16, got {dtype}")
    rows, states = steps * batch, 2 * (steps + 1) * batch
    width = max(input_size, hidden)
    parts = (
        rows * _good_ld(4 * hidden, size) * size,  # ws_gates
        rows * _good_ld(hidden, size) * size,  # ws_ht
        states * _good_ld(width, size) * size,  # ws_states_layer (ws_states_iter shares it)
        states * hidden * size,  # ws_states_iter_c: the cell state, in the dtype torch passes it in
        states * _good_ld(width, _ACCUMULATOR) * _ACCUMULATOR,  # ws_diff_states_layer
        states * _good_ld(width, _ACCUMULATOR) * _ACCUMULATOR,  # ws_diff_states_iter
        states * hidden * _ACCUMULATOR,  # ws_diff_states_iter_c
    )
    return sum(_page(p) for p in parts)


Cast = Callable[[torch.Tensor], torch.Tensor]


def _layer_dtype(input: torch.Tensor, hx: Sequence[torch.Tensor], params: Sequence[torch.Tensor],
                 autocast: torch.dtype | None) -> torch.dtype | None:
    """The dtype the fused layers run in (the autocast dtype, cast from float32), or None where torch's CPU code
    would not run them fused in one dtype here."""
    dtype = autocast or input.dtype
    allowed = {dtype, torch.float32} if autocast is not None else {dtype}
    if dtype not in fused_lstm_dtypes() or any(t.dtype not in allowed for t in (input, *hx, *params)):
        return None
    return dtype


def fused_lstm(args: Sequence[Any], *, autocast: torch.dtype | None = None,
               cast: Cast | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """`torch.lstm(*args)` (its input-and-states form) on meta as torch's CPU code runs it with oneDNN
    (`mkldnn_rnn` in aten's mkldnn/RNN.cpp: one `mkldnn_rnn_layer` per layer and direction, dropout between
    layers), each layer's workspace sized; under CPU autocast (`autocast`, with `cast` making autocast's casts)
    each layer's arguments are cast as autocast casts `mkldnn_rnn_layer`'s, on the CPU's list, layer by layer.
    None for a call torch does not run fused (projections, a dtype oneDNN does not train in here)."""
    if len(args) != 9 or not isinstance(args[0], torch.Tensor) or not isinstance(args[1], (tuple, list)):
        return None
    input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first = args
    directions, per_layer = (2 if bidirectional else 1), (4 if has_biases else 2)
    if (input.dim() != 3 or len(hx) != 2 or len(params) != per_layer * num_layers * directions
            or hx[0].shape[-1] != hx[1].shape[-1]):
        return None  # projections (a third weight per layer, states of two sizes): torch runs its cell there
    dtype = _layer_dtype(input, hx, params, autocast)
    if dtype is None:
        return None
    lower = cast if cast is not None and autocast is not None else (lambda t: t)
    hidden = hx[0].shape[-1]
    x = (input.transpose(0, 1) if batch_first else input).contiguous()  # torch copies a batch-first input
    h0, c0 = hx[0].contiguous(), hx[1].contiguous()
    hs, cs = [], []
    for layer in range(num_layers):
        outputs = []
        for direction in range(directions):
            index = layer * directions + direction
            w = list(params[index * per_layer:(index + 1) * per_layer])
            if not has_biases:  # torch passes zeros shaped as the weights, which the layer saves
                w += [torch.zeros_like(w[0]), torch.zeros_like(w[1])]
            out, hy, cy = _layer(x, w, h0[index], c0[index], lower, reverse=direction > 0,
                                 hidden=hidden, num_layers=num_layers, has_biases=has_biases,
                                 bidirectional=bidirectional, train=train)
            outputs.append(out)
            hs.append(hy)
            cs.append(cy)
        x = outputs[0] if directions == 1 else torch.cat(outputs, -1)
        if dropout != 0 and train and layer < num_layers - 1:
            x = torch.dropout(x, dropout, True)
    return (x.transpose(0, 1) if batch_first else x), torch.stack(hs, 0), torch.stack(cs, 0)


def _layer(x: torch.Tensor, w: list[torch.Tensor], h: torch.Tensor, c: torch.Tensor, lower: Cast,
           *, reverse: bool, hidden: int, num_layers: int, has_biases: bool, bidirectional: bool,
           train: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One fused layer in one direction, its arguments cast in their order (autocast's), its workspace sized."""
    x, w0, w1, w2, w3, h, c = (lower(t) for t in (x, *w, h, c))
    with _SizedWorkspace():
        out, hy, cy, _ = torch.ops.aten.mkldnn_rnn_layer(
            x, w0, w1, w2, w3, h, c, reverse, [], _LSTM_MODE, hidden, num_layers, has_biases, bidirectional,
            False, train)  # the input is time-major already (meta reads batch_first)
    if out.grad_fn is not None and out.device.type == "meta":
        _second_bias_gradient(out.grad_fn)
    return out, hy, cy


class _SizedWorkspace(TorchDispatchMode):
    """While on, the fused layer's workspace on meta is made as large as the CPU kernel makes it, under autograd,
    before autograd saves it: a count holds it from the layer's forward to its backward, and a checkpointed block
    recomputes it alike (early stop included: the recompute stops as the last saved tensor is packed)."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.mkldnn_rnn_layer.default and out[3].device.type == "meta" \
                and torch.is_grad_enabled():  # the CPU kernel makes a workspace only for backward; meta's is empty
            steps, batch, width = args[0].shape
            out[3].resize_(lstm_workspace_bytes(steps, batch, width, args[10], args[0].dtype))
        return out


class _CpuBiasGradients(TorchDispatchMode):
    """While on, the fused layer's backward returns what the CPU kernel returns: its second bias gradient a copy
    of the first (`at::clone(diff_b_)`), made with the others, where torch's meta kernel returns one tensor
    twice. On for one node's backward (`_second_bias_gradient`), so a count on meta sees the copy as the CPU's."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func is torch.ops.aten.mkldnn_rnn_layer_backward.default and out[3] is out[4]:
            out = (*out[:4], out[3].clone(), *out[5:])
        return out


def _second_bias_gradient(node: Any) -> None:
    """Run `node`'s backward (a fused layer's, on meta) under `_CpuBiasGradients`."""
    on: list[_CpuBiasGradients] = []

    def start(_: Any) -> None:
        mode = _CpuBiasGradients()
        mode.__enter__()
        on.append(mode)

    def stop(_: Any, __: Any) -> None:
        if on:
            on.pop().__exit__(None, None, None)

    node.register_prehook(start)
    node.register_hook(stop)


class meta_lstm(TorchFunctionMode):  # noqa: N801 - used as a context, like torch.no_grad
    """Inside the block, `nn.LSTM` on meta tensors runs the CPU's fused oneDNN layer kernel (`policy="cpu"`) in
    the dtypes the CPU runs it in here (`fused_lstm_dtypes`); anything else, and every other policy, runs as
    torch would.

    >>> m = torch.nn.LSTM(4, 8, device="meta")
    >>> with meta_lstm("cpu"):
    ...     m(torch.empty(5, 3, 4, device="meta"))[0].grad_fn.name()
    'MkldnnRnnLayerBackward0'
    """

    def __init__(self, policy: str = "cuda") -> None:
        super().__init__()
        self.policy = policy

    def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if (func is torch.lstm and self.policy == "cpu" and not kwargs and args
                and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta"):
            out = fused_lstm(args)
            if out is not None:
                return out
        return func(*args, **kwargs)
