"""Activation memory of transformers' own Llama and Mixtral (small configs, random weights) against a saved-tensor hook.

Mixtral's experts and Llama's attention save views of bigger storages (q/k/v
of one projection's output, an expert's rows picked from the batch); the graph
counts each storage whole and once, as the hook sees it, to the byte, in
`summary()`, `module_summary()` and the module boxes.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers loads: nothing is ever fetched
transformers = pytest.importorskip("transformers")

import torch  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from test_saved_storage_whole import Case, traced  # noqa: E402

from graphviz_app.analysis.collapse import collapse  # noqa: E402
from graphviz_app.model import NodeKind, human_bytes  # noqa: E402

pytestmark = pytest.mark.slow  # transformers takes seconds to import


class Logits(nn.Module):
    """The causal LM called with `input_ids=`, its logits returned (a tensor, as the hook's forward gives)."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.lm = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.lm(input_ids=ids).logits


def _llama() -> nn.Module:
    return Logits(transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, bos_token_id=0, eos_token_id=0)))


def _mixtral() -> nn.Module:
    return Logits(transformers.MixtralForCausalLM(transformers.MixtralConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2, bos_token_id=0, eos_token_id=0)))


def _ids() -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(0)),)


BUILDS: dict[str, Callable[[], nn.Module]] = {"llama": _llama, "mixtral": _mixtral}


@pytest.mark.parametrize("name", sorted(BUILDS))
def test_a_real_model_s_activations_are_what_the_saved_tensor_hook_sees(name: str) -> None:
    graph, count, _ = traced(Case(name, BUILDS[name], _ids))
    assert dict(graph.summary().activation_bytes) == {"cpu": sum(count.total.values())}
    rows = {r.module: r.activation_bytes for r in graph.module_summary()}
    expected = {module: sum(seen.values()) for module, seen in count.modules.items()}
    assert {module: rows[module] for module in expected} == expected
    boxes = {n.module: dict(n.attrs)["activations"] for n in collapse(graph, depth=2).nodes
             if n.kind is NodeKind.MODULE}
    assert boxes, "the model's layers are drawn as boxes"
    assert boxes == {m: human_bytes(sum(count.modules.get(m, {}).values())) for m in boxes}
