"""find_repeats on transformers' own GPT-2, BERT and Llama, built from small configs (random weights, never downloaded).

The hand-written shapes in lm_shapes.py follow these models op for op; this
file holds the detector to the library's real modeling code: one forward pass
with its `labels=` loss is no leak, `total = total + loss` over k batches is k
repeats holding what the graph holds.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers loads: nothing is ever fetched
transformers = pytest.importorskip("transformers")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from graphviz_app import record, trace  # noqa: E402
from graphviz_app.analysis.repeats import SHOWN_PARAMS, find_repeats  # noqa: E402
from graphviz_app.model import Graph  # noqa: E402

pytestmark = pytest.mark.slow  # transformers takes seconds to import, the 5-step graphs a few more

VOCAB = 64


def _gpt2() -> nn.Module:
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=VOCAB, n_positions=16, n_embd=32, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0))


def _bert() -> nn.Module:
    return transformers.BertForMaskedLM(transformers.BertConfig(
        vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=16))


def _llama() -> nn.Module:
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=16, bos_token_id=0, eos_token_id=0))


MODELS: dict[str, Callable[[], nn.Module]] = {"gpt2": _gpt2, "bert": _bert, "llama": _llama}


def accumulated(name: str, steps: int) -> tuple[Graph, nn.Module]:
    """`total = total + model(input_ids=ids, labels=ids).loss` over `steps` batches, no backward."""
    torch.manual_seed(0)
    model = MODELS[name]()
    with record(model):
        total: torch.Tensor | float = 0.0
        for step in range(steps):
            ids = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(step))
            total = total + model(input_ids=ids, labels=ids).loss
    assert isinstance(total, torch.Tensor)
    return trace(total, model), model


@pytest.mark.parametrize("name", sorted(MODELS))
def test_one_forward_pass_of_the_real_model_is_no_leak(name: str) -> None:
    graph, _ = accumulated(name, 1)
    assert find_repeats(graph) is None


@pytest.mark.parametrize("steps", [2, 5])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_accumulated_steps_of_the_real_model_are_counted_with_the_bytes_the_graph_holds(name: str, steps: int) -> None:
    graph, model = accumulated(name, steps)
    found = find_repeats(graph)
    assert found is not None
    assert found.count == steps
    held = sum(size for _, size in graph.summary().activation_bytes)
    assert found.saved_bytes <= held
    assert found.saved_bytes == pytest.approx(held, rel=0.05)
    text = str(found)
    assert f"in the whole model ({type(model).__name__}) {steps} times" in text
    assert [p for p in found.params if p in text] == list(found.params[:SHOWN_PARAMS])
    assert f"and {len(found.params) - SHOWN_PARAMS} more" in text
