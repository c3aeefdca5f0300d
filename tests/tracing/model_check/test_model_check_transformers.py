"""Models nobody here wrote: GPT-2 and BERT from transformers configs, random weights, dropout on."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from mc_models import ScaledIdentity, def_line

from graphviz_app.analysis.model_check import Status
from graphviz_app.tracing.model_check import check_model

transformers = pytest.importorskip("transformers")

pytestmark = pytest.mark.slow


def _gpt2() -> Any:
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=50, n_positions=16,
                                     bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config).train()


def _bert() -> Any:
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=4,
                                     intermediate_size=64, vocab_size=50, max_position_embeddings=16)
    return transformers.BertForMaskedLM(config).train()


@pytest.mark.parametrize("make", [_gpt2, _bert], ids=["gpt2", "bert"])
def test_gpt2_and_bert_pass_in_training_mode(make: Any) -> None:
    torch.manual_seed(0)
    model = make()
    result = check_model(model, torch.randint(0, 50, (2, 8)))
    assert result.passed, str(result)
    assert result.counts()[Status.PASSED] == len(result.verdicts) > 20


def test_gpt2_with_labels_passes_though_its_loss_is_computed_in_float32() -> None:
    # transformers' loss runs logits.float(): in float64 copies the model's output is float32, so finite
    # differences are read at float32's precision (the whole model failed at relative 4.6e-05 before).
    torch.manual_seed(0)
    ids = torch.randint(0, 50, (2, 8))
    result = check_model(_gpt2(), input_ids=ids, labels=ids.clone())
    assert result.passed, str(result)
    root = next(v for v in result.verdicts if v.path == "")
    assert any("its output is float32 though it ran on float64 copies" in n for n in root.notes)


def test_a_wrong_function_planted_in_gpt2_by_a_forward_hook_is_named() -> None:
    torch.manual_seed(0)
    model = _gpt2()
    model.transformer.h[1].mlp.act.register_forward_hook(lambda module, args, out: ScaledIdentity.apply(out))
    result = check_model(model, torch.randint(0, 50, (2, 8)))
    (culprit,) = result.culprits
    assert (culprit.path, culprit.name) == ("transformer.h.1.mlp.act", "ScaledIdentity.backward")
    assert culprit.source is not None and culprit.source.endswith(f"mc_models.py:{def_line(ScaledIdentity.backward)}")
    assert culprit.ratio == pytest.approx(1.02, rel=1e-6)
    assert all(v.culprit or v.explained_by for v in result.verdicts if v.status == Status.FAILED)


def test_a_diffusers_unet_passes_and_its_output_dataclass_is_read() -> None:
    diffusers = pytest.importorskip("diffusers")
    torch.manual_seed(0)
    model = diffusers.UNet2DModel(
        sample_size=8, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(8, 16),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=4, attention_head_dim=8)
    result = check_model(model, torch.randn(2, 3, 8, 8), torch.tensor([10, 20]))
    assert result.passed, str(result)
    root = next(v for v in result.verdicts if v.path == "")
    assert root.status == Status.PASSED  # the UNet2DOutput dataclass holds the output tensor
    assert {v.path for v in result.verdicts if v.status == Status.NOT_CHECKABLE} == {"time_proj"}
