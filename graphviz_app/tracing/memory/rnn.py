"""An LSTM on `meta` as the CPU runs it: oneDNN's fused layer kernel, with the workspace it saves sized.

On `meta`, `nn.LSTM` takes torch's step-by-step cell (a matmul, a split and five
pointwise ops per time step, each saving its inputs); on the CPU torch runs one
oneDNN kernel per layer (`mkldnn_rnn_layer`), whose backward keeps the layer's
input and output, its states and a uint8 workspace that oneDNN lays out itself.
`meta_lstm` makes meta take the fused path; torch's meta kernel returns the
workspace empty, and `lstm_workspace_bytes` gives the size the CPU kernel allocates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["meta_lstm", "lstm_workspace_bytes", "FUSED_LSTM_NODE", "WORKSPACE_NAME"]

FUSED_LSTM_NODE = "MkldnnRnnLayerBackward0"
WORKSPACE_NAME = "result3"  # the fourth output of mkldnn_rnn_layer, saved for its backward
_LSTM_MODE = 2  # the cuDNN-style mode number torch passes for an LSTM
_PAGE = 4096


def _page(n: int) -> int:
    return -(-n // _PAGE) * _PAGE


def _leading(dim: int) -> int:
    """oneDNN's leading dimension for float32 rows: a multiple of 16, and 16 more when a multiple of 256."""
    ld = -(-dim // 16) * 16
    return ld + 16 if ld % 256 == 0 else ld


def lstm_workspace_bytes(steps: int, batch: int, input_size: int, hidden: int) -> int:
    """Bytes of the workspace the CPU's fused LSTM layer (oneDNN, float32, one direction) saves for backward.

    oneDNN's layout: the gates of every step (twice, once with padded rows), the hidden
    outputs, and three state buffers over steps + 1 and two layers' worth of rows, each
    part starting on a 4 KiB page. Checked against torch 2.13's CPU kernel on 48 shapes
    (1 to 64 steps and rows, sizes 8 to 1000): exact or one page (4,096 B) under.

    >>> lstm_workspace_bytes(10, 16, 32, 64)  # torch allocates 667,648 B
    667648
    """
    gates, width = 4 * hidden, max(input_size, hidden)
    parts = (
        steps * batch * _leading(gates) * 4,
        (steps + 1) * batch * gates * 4,
        steps * batch * _leading(hidden) * 4,
        *([2 * (steps + 1) * batch * _leading(width) * 4] * 3),
    )
    return sum(_page(p) for p in parts)


def _fused_lstm(input: torch.Tensor, hx: Sequence[torch.Tensor], params: Sequence[torch.Tensor], has_biases: bool,
                num_layers: int, dropout: float, train: bool, bidirectional: bool,
                batch_first: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """`torch.lstm(...)` as torch's CPU code runs it with oneDNN (`mkldnn_impl`), or None for a call it
    does not cover (two directions, projections, dropout between layers, not float32)."""
    per_layer = 4 if has_biases else 2
    if (bidirectional or (dropout > 0 and train and num_layers > 1) or input.dim() != 3 or len(hx) != 2
            or len(params) != per_layer * num_layers or input.dtype != torch.float32
            or hx[0].shape[-1] != hx[1].shape[-1]):
        return None
    hidden = hx[0].shape[-1]
    x = input.transpose(0, 1) if batch_first else input
    hs, cs = [], []
    for layer in range(num_layers):
        w = list(params[layer * per_layer:(layer + 1) * per_layer])
        if not has_biases:
            w += [x.new_zeros(4 * hidden), x.new_zeros(4 * hidden)]
        x, hy, cy, _ = torch.ops.aten.mkldnn_rnn_layer(
            x, w[0], w[1], w[2], w[3], hx[0][layer], hx[1][layer], False, [], _LSTM_MODE, hidden, num_layers,
            has_biases, False, False, train)
        hs.append(hy)
        cs.append(cy)
    return (x.transpose(0, 1) if batch_first else x), torch.stack(hs, 0), torch.stack(cs, 0)


class meta_lstm(TorchFunctionMode):  # noqa: N801 - used as a context, like torch.no_grad
    """Inside the block, `nn.LSTM` on meta tensors runs the CPU's fused oneDNN layer kernel (`policy="cpu"`);
    anything else, and every other policy, runs as torch would.

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
        if (func is torch.lstm and self.policy == "cpu" and not kwargs and len(args) == 9
                and isinstance(args[0], torch.Tensor) and args[0].device.type == "meta"
                and isinstance(args[1], (tuple, list))):
            out = _fused_lstm(*args)
            if out is not None:
                return out
        return func(*args, **kwargs)
