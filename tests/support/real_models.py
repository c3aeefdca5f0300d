"""Graphs of real models nobody here wrote, from small configs with random weights (nothing downloaded).

GPT-2 (transformers' GPT2LMHeadModel, with its loss), Whisper (WhisperForConditionalGeneration, with
its loss) and a UNet (diffusers' UNet2DModel, with a mean-squared-error loss), traced with their modules.
"""

from __future__ import annotations

import os
from collections.abc import Callable

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers loads: nothing is ever fetched

import torch  # noqa: E402

from graphviz_app import record, trace  # noqa: E402
from graphviz_app.model import Graph  # noqa: E402

__all__ = ["gpt2", "whisper", "unet", "REAL_MODELS"]


def gpt2(layers: int = 4) -> Graph:
    import transformers

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=64, n_positions=16, n_embd=32, n_layer=layers, n_head=4, bos_token_id=0, eos_token_id=0))
    ids = torch.randint(0, 64, (2, 12))
    with record(model):
        loss = model(input_ids=ids, labels=ids).loss
    return trace(loss, model)


def whisper(layers: int = 2) -> Graph:
    import transformers

    torch.manual_seed(0)
    config = transformers.WhisperConfig(
        vocab_size=64, num_mel_bins=8, encoder_layers=layers, decoder_layers=layers, d_model=32,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
        max_source_positions=16, max_target_positions=16, pad_token_id=0, bos_token_id=1, eos_token_id=2,
        decoder_start_token_id=1)
    model = transformers.WhisperForConditionalGeneration(config)
    features = torch.randn(1, 8, 32)
    labels = torch.randint(3, 64, (1, 6))
    with record(model):
        loss = model(input_features=features, labels=labels).loss
    return trace(loss, model)


def unet() -> Graph:
    import diffusers

    torch.manual_seed(0)
    model = diffusers.UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                                  block_out_channels=(16, 32), norm_num_groups=8,
                                  down_block_types=("DownBlock2D", "DownBlock2D"),
                                  up_block_types=("UpBlock2D", "UpBlock2D"))
    x = torch.randn(1, 3, 16, 16)
    with record(model):
        loss = (model(x, 10).sample - x).pow(2).mean()
    return trace(loss, model)


REAL_MODELS: dict[str, Callable[[], Graph]] = {"gpt2": gpt2, "whisper": whisper, "unet": unet}
