"""The examples a person can load with one click, each with a gradient to try checking."""

from __future__ import annotations

from dataclasses import dataclass

from .urlstate import SEED_PROGRAM

__all__ = ["Example", "EXAMPLES", "example", "example_for"]


@dataclass(frozen=True, slots=True)
class Example:
    """A program for the editor; `wrt`/`hint` suggest a hand gradient to check."""

    key: str
    title: str
    blurb: str
    program: str
    wrt: str
    hint: str


EXAMPLES: tuple[Example, ...] = (
    Example(
        key="seed",
        title="((x+2)**2+3).mean()",
        blurb="The tutorials' running example; its gradient is 2*(x+2)/3 = [4/3, 2, 8/3].",
        program=SEED_PROGRAM,
        wrt="x",
        hint="2*(x+2)/3",
    ),
    Example(
        key="mlp",
        title="2-layer MLP",
        blurb="Two linear layers with a ReLU between them and a squared-error loss.",
        program=(
            "torch.manual_seed(0)\n"
            "x = torch.randn(4, 3)\n"
            "W1 = torch.randn(3, 8, requires_grad=True)\n"
            "b1 = torch.zeros(8, requires_grad=True)\n"
            "W2 = torch.randn(8, 1, requires_grad=True)\n"
            "b2 = torch.zeros(1, requires_grad=True)\n"
            "h = torch.relu(x @ W1 + b1)\n"
            "((h @ W2 + b2) ** 2).mean()\n"
        ),
        wrt="W2",
        hint="h.T @ (h @ W2 + b2) / 2",
    ),
    Example(
        key="softmax",
        title="softmax + cross-entropy",
        blurb="Log-softmax and the negative log-likelihood of the right classes.",
        program=(
            "torch.manual_seed(0)\n"
            "logits = torch.randn(3, 5, requires_grad=True)\n"
            "target = torch.tensor([1, 0, 4])\n"
            "logp = F.log_softmax(logits, dim=1)\n"
            "F.nll_loss(logp, target)\n"
        ),
        wrt="logits",
        hint="(torch.softmax(logits, dim=1) - F.one_hot(target, 5)) / 3",
    ),
    Example(
        key="devices",
        title="a tensor moved between devices",
        blurb=(
            "w is made on the sidebar's device and x on the CPU; without x.to(...) a GPU run "
            "fails with 'Expected all tensors to be on the same device'. The copy is drawn in "
            "red when the devices differ (pick a cuda device in the sidebar)."
        ),
        program=(
            "w = torch.ones(3, requires_grad=True)\n"
            "x = torch.arange(3., dtype=torch.float64, device='cpu', requires_grad=True)\n"
            "x_moved = x.to(device=w.device, dtype=w.dtype)\n"
            "(w * x_moved).sum()\n"
        ),
        wrt="w",
        hint="x_moved",
    ),
    Example(
        key="accumulate",
        title="loss accumulated without .item()",
        blurb=(
            "total = total + loss keeps every step's graph alive, so it grows with each step; "
            "total + loss.item() would keep only a number. The page counts, from the graph alone, "
            "how many forward passes it holds and the memory they keep saved."
        ),
        program=(
            "w = torch.ones(3, requires_grad=True)\n"
            "total = 0\n"
            "for step in range(4):\n"
            "    x = torch.full((3,), float(step))\n"
            "    loss = ((w * x - 1) ** 2).mean()\n"
            "    total = total + loss\n"
            "total\n"
        ),
        wrt="w",
        hint="2 * (14*w - 6) / 3",
    ),
    Example(
        key="nan",
        title="a NaN in backward",
        blurb=(
            "torch.where(x > 0, torch.log(x), 0) is finite in the forward, but at x = 0 backward "
            "multiplies log's derivative 1/0 = inf by where's 0 and makes NaN. With 'Show "
            "gradients' on, the page names the op and the line; the fix is in the forward: "
            "torch.log(torch.where(x > 0, x, 1))."
        ),
        program=(
            "x = torch.tensor([0., 1., 2.], requires_grad=True)\n"
            "y = torch.where(x > 0, torch.log(x), 0)\n"
            "y.sum()\n"
        ),
        wrt="x",
        hint="torch.where(x > 0, 1 / x, 0)",
    ),
    Example(
        key="vanishing",
        title="vanishing gradients",
        blurb=(
            "Twenty sigmoids in a row: each one multiplies the gradient by at most 0.25, so x.grad "
            "is about 1e-13. With 'Show gradients' on, the edges fade from the output down the stack."
        ),
        program=(
            "x = torch.linspace(-2., 2., 5, requires_grad=True)\n"
            "h = x\n"
            "for layer in range(20):\n"
            "    h = torch.sigmoid(h)\n"
            "h.sum()\n"
        ),
        wrt="x",
        hint="torch.zeros_like(x)",
    ),
    Example(
        key="custom",
        title="a custom backward that is wrong",
        blurb=(
            "custom.square_wrong_backward(x) computes x**2 but its hand-written backward "
            "forgets the 2: check 2*x against it and see autograd blamed."
        ),
        program=(
            "x = torch.arange(1., 4., requires_grad=True)\n"
            "custom.square_wrong_backward(x).sum()\n"
        ),
        wrt="x",
        hint="2*x",
    ),
    Example(
        key="penalty",
        title="a gradient penalty (a gradient of a gradient)",
        blurb=(
            "torch.autograd.grad(y, x, create_graph=True) gives the gradient g as a tensor with a graph "
            "of its own (order 1: TanhBackwardBackward0, ...), so the penalty (g ** 2).sum() can be "
            "differentiated again: its gradient h holds the ops of that second backward (order 2). "
            "Colour the drawing by 'order of derivative' to tell the forward's ops (order 0) from each "
            "backward's; the check differentiates h.sum() once more."
        ),
        program=(
            "torch.manual_seed(0)\n"
            "x = torch.randn(4, requires_grad=True)\n"
            "y = (x.tanh() ** 2).sum()\n"
            "g, = torch.autograd.grad(y, x, create_graph=True)\n"
            "h, = torch.autograd.grad((g ** 2).sum(), x, create_graph=True)\n"
            "h.sum()\n"
        ),
        wrt="x",
        # h = 8 t (1 - t^2)^2 (1 - 3 t^2), t = tanh(x); its derivative:
        hint="8 * (1 - x.tanh()**2)**2 * (1 - 14 * x.tanh()**2 + 21 * x.tanh()**4)",
    ),
    Example(
        key="cnn",
        title="a small CNN with BatchNorm",
        blurb=(
            "nn modules: two Conv2d + BatchNorm2d + ReLU blocks and a Linear head. Each op is drawn "
            "inside its module (net.0, net.1, ...); the table below says how many ops each module "
            "made and the memory its saved tensors hold. Set 'Module depth' to 1 to see one box per "
            "module variable."
        ),
        program=(
            "torch.manual_seed(0)\n"
            "net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),\n"
            "                    nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())\n"
            "head = nn.Linear(8, 10)\n"
            "x = torch.randn(2, 3, 16, 16)\n"
            "y = head(net(x).mean((2, 3)))\n"
            "w = torch.ones(10, requires_grad=True)\n"
            "(y * w).sum()\n"
        ),
        wrt="w",
        hint="y.sum(0)",
    ),
    Example(
        key="transformer",
        title="a 6-layer transformer encoder",
        blurb=(
            "nn.TransformerEncoder copies its layer six times: hundreds of ops. 'Roll repeats' folds "
            "enc.layers.0–5 into one box marked ×6: click it to open one layer, and ◀ ▶ in its title "
            "bar step to the others. 'Module depth' picks the boxes the graph opens on (1 is enc, "
            "2 enc.layers, 3 each layer)."
        ),
        program=(
            "torch.manual_seed(0)\n"
            "layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)\n"
            "enc = nn.TransformerEncoder(layer, 6)\n"
            "x = torch.randn(2, 5, 32, requires_grad=True)\n"
            "y = enc(x)\n"
            "w = torch.ones(32, requires_grad=True)\n"
            "(y * w).sum()\n"
        ),
        wrt="w",
        hint="y.sum((0, 1))",
    ),
    Example(
        key="lstm",
        title="a 2-layer LSTM",
        blurb=(
            "nn.LSTM runs its layers and time steps in one fused op per layer; the graph shows what "
            "backward keeps for it. The readout w weighs the last step's hidden state."
        ),
        program=(
            "torch.manual_seed(0)\n"
            "lstm = nn.LSTM(4, 8, num_layers=2)\n"
            "x = torch.randn(5, 3, 4)\n"
            "out = lstm(x)[0]\n"
            "w = torch.ones(8, requires_grad=True)\n"
            "(out[-1] * w).sum()\n"
        ),
        wrt="w",
        hint="out[-1].sum(0)",
    ),
    Example(
        key="memory-accumulate",
        title="memory: a loss kept without .item()",
        blurb=(
            "Three steps add their loss to total without .item(). Open 'Memory of one step': 48.0 KiB "
            "are alive when backward starts, 16 KiB per step (each step's batch x, saved by the Linear, "
            "and its ReLU output, 8 KiB each), all kept until this one backward; with .item() none would be."
        ),
        program=(
            "torch.manual_seed(0)\n"
            "net = nn.Linear(64, 64)\n"
            "scale = torch.ones((), requires_grad=True)\n"
            "total = 0\n"
            "for step in range(3):\n"
            "    x = torch.randn(32, 64)\n"
            "    total = total + net(x).relu().mean()\n"
            "total * scale\n"
        ),
        wrt="scale",
        hint="total",
    ),
    Example(
        key="memory-half",
        title="memory: float32 against float16",
        blurb=(
            "The same Linear + ReLU in float32 and in float16 (as .half() makes it). Open 'Memory of one "
            "step': the float32 branch saves 16 KiB for backward (its input and its ReLU output), the "
            "float16 branch 8 KiB. On CPU torch has float16 kernels for these ops; a few (ctc_loss, "
            "linalg.inv, the FFTs) have none."
        ),
        program=(
            "torch.manual_seed(0)\n"
            "net32 = nn.Linear(64, 64)\n"
            "net16 = nn.Linear(64, 64, dtype=torch.float16)\n"
            "x = torch.randn(32, 64)\n"
            "scale = torch.ones((), requires_grad=True)\n"
            "y32 = net32(x).relu()\n"
            "y16 = net16(x.half()).relu()\n"
            "(y32.sum() + y16.float().sum()) * scale\n"
        ),
        wrt="scale",
        hint="y32.sum() + y16.float().sum()",
    ),
    Example(
        key="memory-no-grad",
        title="memory: a forward under no_grad",
        blurb=(
            "The same Linear + ReLU run twice: once as for training, once under torch.no_grad() as for "
            "inference. Open 'Memory of one step': the training forward saves 16 KiB for backward (its "
            "input and its ReLU output), the no_grad one nothing: its output is a plain tensor with no "
            "graph behind it."
        ),
        program=(
            "torch.manual_seed(0)\n"
            "net = nn.Linear(64, 64)\n"
            "x = torch.randn(32, 64)\n"
            "scale = torch.ones((), requires_grad=True)\n"
            "y_train = net(x).relu()\n"
            "with torch.no_grad():\n"
            "    y_infer = net(x).relu()\n"
            "(y_train.sum() + y_infer.sum()) * scale\n"
        ),
        wrt="scale",
        hint="y_train.sum() + y_infer.sum()",
    ),
)


def example(key: str) -> Example:
    """The example with this key.

    Raises:
        KeyError: naming the keys there are.
    """
    for ex in EXAMPLES:
        if ex.key == key:
            return ex
    raise KeyError(f"no example {key!r}; the examples are {', '.join(e.key for e in EXAMPLES)}")


def example_for(program: str) -> Example | None:
    """The example whose program this is (ignoring surrounding blank space), or None."""
    wanted = program.strip()
    return next((ex for ex in EXAMPLES if ex.program.strip() == wanted), None)
