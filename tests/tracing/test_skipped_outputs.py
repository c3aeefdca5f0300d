"""Outputs without a gradient beside ones with a graph (ViT-MAE's mask and ids_restore) are skipped with a note
that says why, without telling the person to make them require grad."""

from __future__ import annotations

import pytest
import torch

from graphviz_app import trace, trace_model


def test_a_mask_and_indices_beside_a_loss_are_skipped_with_the_right_reason() -> None:
    x = torch.randn(4, requires_grad=True)
    ids = torch.argsort(torch.rand(4))
    graph = trace({"logits": (x * 2).sum(), "mask": torch.ones(4).gather(0, ids), "ids_restore": ids})
    mask, ids_note = graph.notes
    assert mask.startswith("output['mask'] has no autograd graph and was skipped: nothing that requires grad")
    assert ids_note.startswith("output['ids_restore'] has no autograd graph and was skipped: it holds torch.int64")
    assert not any("requires_grad=True" in n for n in graph.notes)


@pytest.mark.slow
def test_vit_mae_notes_do_not_ask_for_gradients_on_its_mask() -> None:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.ViTMAEConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                                    image_size=8, patch_size=4, decoder_hidden_size=16, decoder_num_hidden_layers=1,
                                    decoder_num_attention_heads=2, decoder_intermediate_size=32)
    torch.manual_seed(0)
    graph = trace_model(transformers.ViTMAEModel(cfg), torch.randn(1, 3, 8, 8))
    notes = [n for n in graph.notes if "has no autograd graph" in n]
    assert any("'mask'" in n for n in notes) and any("'ids_restore'" in n for n in notes), graph.notes
    assert not any("requires_grad=True" in n for n in notes)
