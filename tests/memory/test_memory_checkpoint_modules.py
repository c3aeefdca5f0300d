"""`checkpoint_modules`: the advice applied to the model for training, its peak PyTorch's MemTracker's figure for the
plan; and the line saying how, printed with the plan (by the CLI too)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from mem_oracle import StepSpec, memtracker_peak
from mem_zoo import Block, TinyGPT

from graphviz_app.cli import commands as cli
from graphviz_app.errors import TraceError
from graphviz_app.memory import advise_checkpoints, checkpoint_modules, forecast, total_bytes


def _ids(batch: int) -> torch.Tensor:
    return torch.randint(0, 512, (batch, 32), generator=torch.Generator().manual_seed(batch))


class Stack(torch.nn.Module):
    """Four MLP blocks in a ModuleList the parent iterates: the peak is their saved activations."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(Block(32) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x.square().mean()


@pytest.mark.parametrize("batch", [1, 4])
def test_the_plan_applied_for_training_holds_what_the_plan_predicted(batch: int) -> None:
    x = torch.randn(batch, 256, 32, generator=torch.Generator().manual_seed(batch))
    torch.manual_seed(0)
    whole = memtracker_peak(StepSpec(Stack, lambda b: ((x,), {}), lambda out: out), batch).peak_bytes
    step = forecast(Stack(), x, policy="cpu")
    plan = advise_checkpoints(Stack(), x, budget_bytes=total_bytes(step) - step.peak_bytes // 3)
    assert plan.modules and "blocks" not in plan.modules  # members, not the ModuleList

    def applied() -> torch.nn.Module:
        return checkpoint_modules(Stack(), plan.modules)

    after = memtracker_peak(StepSpec(applied, lambda b: ((x,), {}), lambda out: out), batch).peak_bytes
    assert after == plan.predicted_peak_after < whole == plan.predicted_peak_before
    # the plan printed in a script or a notebook says how, as the CLI does
    assert (f"to checkpoint them in training: graphviz_app.memory.checkpoint_modules(model, {list(plan.modules)!r})"
            in str(plan).splitlines())


def test_gradients_are_the_same_with_the_modules_checkpointed() -> None:
    ids = _ids(2)
    torch.manual_seed(0)
    plain = TinyGPT()
    checked = TinyGPT()
    checked.load_state_dict(plain.state_dict())
    checkpoint_modules(checked, ["blocks.0", "blocks.2.fc1"])
    plain(ids).backward()
    checked(ids).backward()
    for (name, p), q in zip(plain.named_parameters(), checked.parameters(), strict=True):
        assert torch.allclose(p.grad, q.grad, atol=1e-6), name


@pytest.mark.parametrize(("names", "match"), [
    (["blocks"], r"'blocks', a ModuleList whose forward never runs: name its members instead"),
    (["blocks.9"], r"the plan names module 'blocks.9', which TinyGPT does not have"),
    (["blocks.0", "nope"], r"the plan names module 'nope'"),
])
def test_a_name_it_cannot_checkpoint_is_refused_before_anything_is_wrapped(names: list[str], match: str) -> None:
    model = TinyGPT()
    with pytest.raises(TraceError, match=match):
        checkpoint_modules(model, names)
    assert "forward" not in vars(model.blocks[0])


def test_a_module_checkpointed_twice_is_refused_with_how_to_undo() -> None:
    model = checkpoint_modules(TinyGPT(), ["blocks.1"])
    with pytest.raises(TraceError, match=r"'blocks.1' already has a forward of its own .*del model.get_submodule"):
        checkpoint_modules(model, ["blocks.1"])
    del model.get_submodule("blocks.1").forward
    assert checkpoint_modules(model, ["blocks.1"]) is model


def test_the_cli_says_how_to_apply_the_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "gpt.py"
    script.write_text(
        "import torch\n\n"
        "class Stack(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.blocks = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.GELU(),\n"
        "                                                              torch.nn.Linear(128, 32)) for _ in range(4))\n\n"
        "    def forward(self, x):\n"
        "        for block in self.blocks:\n"
        "            x = x + block(x)\n"
        "        return x.square().mean()\n\n"
        "def build():\n"
        "    torch.manual_seed(0)\n"
        "    return Stack(), torch.randn(2, 256, 32)\n", encoding="utf-8")
    code = cli.main(["memory", f"{script}:build", "--checkpoint"])
    out = capsys.readouterr().out
    assert code == 0
    line = next(x for x in out.splitlines() if x.startswith("to checkpoint them in training: "))
    assert line.startswith("to checkpoint them in training: graphviz_app.memory.checkpoint_modules(model, ['blocks.")
