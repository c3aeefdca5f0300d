"""Importing this module warms the lazily loaded parts of torch the evaluator uses.

A runner's forkserver imports it once (`rehearsal.PRELOAD`), so every worker forked from
it starts warm: the first shape check on torch's ``meta`` device alone imports
hundreds of torch modules (seconds), which would otherwise land on the first
job of every fresh worker and count against its time limit.
"""

from __future__ import annotations

from .api import evaluate
from .errors import ExprError
from .limits import Limits

__all__ = ["warm_up"]

_PROGRAMS = (
    "x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()",
    "x = torch.ones(3)\ntorch.einsum('i,j->ij', x, x).sum() + F.conv1d(x.reshape(1, 1, 3), torch.ones(1, 1, 2)).sum()",
    "x = torch.ones(3)\n"
    "F.pad(x, (1, 0)).sum() + F.one_hot(torch.arange(3), 3).sum() + x.diag().sum() + x[[0, 1]].sum()",
    "x = torch.ones(3)\n"
    "torch.cdist(x[None], x[None]).sum() + F.interpolate(x.reshape(1, 1, 3), scale_factor=2.0).sum()",
    "x = torch.ones(3, requires_grad=True)\n(F.softmax(x, dim=0) * custom.square(x)).sum() + F.mse_loss(x, x * 0)",
    # nn modules: built and sized on meta, then run (the gallery's CNN, encoder and LSTM kinds)
    "net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.ReLU(), nn.Conv2d(2, 1, 1))\n"
    "enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True), 1)\n"
    "lstm = nn.LSTM(4, 2)\n"
    "net(torch.ones(1, 1, 4, 4)).sum() + enc(torch.ones(1, 2, 4)).sum() + lstm(torch.ones(2, 1, 4))[0].sum()",
)


# A fixed, small amount of work, run without the language's time limit: on a busy machine
# the first meta op alone can take longer than its 10 s, and an error here stops the
# forkserver, so that no worker can start at all.
_NO_TIME_LIMIT = Limits(max_seconds=float("inf"))


def warm_up() -> None:
    """Run a few representative programs once (a few seconds, once per process)."""
    for source in _PROGRAMS:
        evaluate(source, limits=_NO_TIME_LIMIT, isolated=False)
    try:
        evaluate("torch.ones(2) + torch.ones(3)", isolated=False)  # the error translation path
    except ExprError:
        pass


warm_up()
