"""A zoo of models nobody here wrote (transformers and diffusers configs, random weights, never downloaded),
plus plain torch models with the awkward parts: tied weights, checkpointing in both modes, a forward peak.

Each entry is a `StepSpec` (a factory, so PyTorch's MemTracker can build it again under
FakeTensorMode) with a name, the batch sizes it is checked at, and tags saying what is
awkward about it. Configs are small: the whole zoo runs on a laptop's CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from mem_oracle import StepSpec
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

__all__ = ["ZooModel", "ZOO", "by_name"]


@dataclass(frozen=True)
class ZooModel:
    name: str
    spec: StepSpec
    batches: tuple[int, ...] = (1, 4)
    tags: frozenset[str] = field(default_factory=frozenset)


def _ids(vocab: int, seq: int) -> Callable[[int], tuple[tuple[Any, ...], dict[str, Any]]]:
    def inputs(batch: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
        g = torch.Generator().manual_seed(batch)
        ids = torch.randint(0, vocab, (batch, seq), generator=g)
        return (), {"input_ids": ids, "labels": ids.clone()}
    return inputs


def _hf_loss(out: Any) -> torch.Tensor:
    return out.loss


def _hf(config_name: str, model_name: str, **config: Any) -> Callable[[], nn.Module]:
    def build() -> nn.Module:
        import transformers
        cfg = getattr(transformers, config_name)(**config)
        return getattr(transformers, model_name)(cfg).train()
    return build


def _gc(reentrant: bool) -> Callable[[nn.Module], nn.Module]:
    def prepare(model: nn.Module) -> nn.Module:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": reentrant})
        return model
    return prepare


def _half(model: nn.Module) -> nn.Module:
    return model.to(torch.bfloat16)


# -- plain torch models with one awkward part each -------------------------------------------------


class TiedPair(nn.Module):
    """Two modules sharing one weight: its two gradients are summed before AccumulateGrad."""

    def __init__(self, vocab: int = 512, d: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.head(torch.tanh(self.embed(ids))).flatten(0, 1), ids.flatten())


class LeafTwice(nn.Module):
    """One parameter used by two ops (x @ w and (x @ w) @ w.T): a leaf with two consumers."""

    def __init__(self, d: int = 256) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, d) / d ** 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (torch.relu(x @ self.w) @ self.w.t()).square().mean()


class UsedTwice(nn.Module):
    """One weight used by two matmuls whose gradients are new tensors, `(x @ w) @ w`: a plain step sums the second
    into the first in place; under a dispatch mode (forecast's fake tensors, `measure` on CPU, MemTracker) torch
    makes a third."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x @ self.w) @ self.w).sum()


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class TinyGPT(nn.Module):
    """A tied-embedding MLP "GPT" whose blocks sit in a ModuleList the parent iterates, optionally checkpointed."""

    def __init__(self, vocab: int = 512, d: int = 64, layers: int = 4, reentrant: bool | None = None) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight
        self.reentrant = reentrant

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x) if self.reentrant is None else checkpoint(block, x, use_reentrant=self.reentrant)
        return F.cross_entropy(self.head(self.norm(x)).flatten(0, 1), ids.flatten())


class GRUTagger(nn.Module):
    """A bidirectional GRU tagger: the per-step outputs of both directions stacked and concatenated (forward peak)."""

    def __init__(self, vocab: int = 200, d: int = 32, hidden: int = 64, tags: int = 9) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.gru = nn.GRU(d, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, tags)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h, _ = self.gru(self.embed(ids))
        return F.cross_entropy(self.out(h).flatten(0, 1), (ids % 9).flatten())


class LSTMLM(nn.Module):
    def __init__(self, vocab: int = 300, d: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.lstm = nn.LSTM(d, d, num_layers=2, batch_first=True)
        self.out = nn.Linear(d, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.out(self.lstm(self.embed(ids))[0]).flatten(0, 1), ids.flatten())


class ConvBN(nn.Sequential):
    """A small VGG-like CNN with BatchNorm after every convolution."""

    def __init__(self) -> None:
        layers: list[nn.Module] = []
        width = 3
        for out in (16, 32, 32, 64):
            layers += [nn.Conv2d(width, out, 3, padding=1, bias=False), nn.BatchNorm2d(out), nn.ReLU()]
            width = out
            layers.append(nn.MaxPool2d(2) if out != 64 else nn.AdaptiveAvgPool2d(1))
        super().__init__(*layers, nn.Flatten(), nn.Linear(64, 10))


def _plain(cls: Callable[[], nn.Module], shape: Callable[[int], tuple[int, ...]], *, ids: int | None = None,
           ) -> tuple[Callable[[], nn.Module], Callable[[int], tuple[tuple[Any, ...], dict[str, Any]]]]:
    def inputs(batch: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
        g = torch.Generator().manual_seed(batch)
        if ids is not None:
            return (torch.randint(0, ids, shape(batch), generator=g),), {}
        return (torch.randn(shape(batch), generator=g),), {}
    return cls, inputs


def _scalar(out: Any) -> torch.Tensor:
    return out if out.dim() == 0 else out.float().square().mean()


def _plain_model(name: str, cls: Callable[[], nn.Module], shape: Callable[[int], tuple[int, ...]], *,
                 ids: int | None = None, tags: tuple[str, ...] = (), batches: tuple[int, ...] = (1, 8),
                 prepare: Callable[[nn.Module], nn.Module] | None = None,
                 autocast: torch.dtype | None = None) -> ZooModel:
    build, inputs = _plain(cls, shape, ids=ids)
    spec = StepSpec(build, inputs, _scalar, prepare or (lambda m: m), autocast)
    return ZooModel(name, spec, batches, frozenset(tags))


def _image(channels: int, size: int) -> Callable[[int], tuple[tuple[Any, ...], dict[str, Any]]]:
    def inputs(batch: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
        g = torch.Generator().manual_seed(batch)
        return (), {"pixel_values": torch.randn(batch, channels, size, size, generator=g),
                    "labels": torch.randint(0, 3, (batch,), generator=g)}
    return inputs


def _seq2seq(vocab: int, seq: int) -> Callable[[int], tuple[tuple[Any, ...], dict[str, Any]]]:
    def inputs(batch: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
        g = torch.Generator().manual_seed(batch)
        ids = torch.randint(2, vocab, (batch, seq), generator=g)
        return (), {"input_ids": ids, "labels": torch.randint(2, vocab, (batch, seq // 2), generator=g)}
    return inputs


def _whisper() -> nn.Module:
    import transformers
    cfg = transformers.WhisperConfig(vocab_size=500, num_mel_bins=16, d_model=64, encoder_layers=1, decoder_layers=1,
                                     encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                     decoder_ffn_dim=128, max_source_positions=32, max_target_positions=32,
                                     decoder_start_token_id=1, pad_token_id=0)
    return transformers.WhisperForConditionalGeneration(cfg).train()


def _audio(batch: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    g = torch.Generator().manual_seed(batch)
    return (), {"input_features": torch.randn(batch, 16, 64, generator=g),
                "labels": torch.randint(2, 500, (batch, 8), generator=g)}


def _unet() -> nn.Module:
    from diffusers import UNet2DModel
    return UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                       block_out_channels=(16, 32), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=8,
                       attention_head_dim=8).train()


def _unet_inputs(batch: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    g = torch.Generator().manual_seed(batch)
    return (torch.randn(batch, 3, 16, 16, generator=g), torch.tensor(10)), {}


def _sample(out: Any) -> torch.Tensor:
    return out.sample.square().mean()


_GPT2 = dict(vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=4)
_LLAMA = dict(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=64)


def _lm(name: str, config: str, model: str, cfg: dict[str, Any], *, seq: int = 32, tags: tuple[str, ...] = (),
        prepare: Callable[[nn.Module], nn.Module] | None = None, autocast: torch.dtype | None = None,
        batches: tuple[int, ...] = (1, 4)) -> ZooModel:
    spec = StepSpec(_hf(config, model, **cfg), _ids(cfg["vocab_size"], seq), _hf_loss, prepare or (lambda m: m),
                    autocast)
    return ZooModel(name, spec, batches, frozenset(tags))


ZOO: tuple[ZooModel, ...] = (
    _lm("gpt2", "GPT2Config", "GPT2LMHeadModel", _GPT2, tags=("tied", "hf")),
    _lm("bert-mlm", "BertConfig", "BertForMaskedLM",
        dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
             max_position_embeddings=64), tags=("tied", "hf")),
    ZooModel("t5", StepSpec(_hf("T5Config", "T5ForConditionalGeneration", vocab_size=500, d_model=64, d_kv=16,
                                d_ff=128, num_layers=2, num_heads=4, decoder_start_token_id=0),
                            _seq2seq(500, 16), _hf_loss), (1, 4), frozenset({"tied", "encoder-decoder", "hf"})),
    _lm("qwen2-tied", "Qwen2Config", "Qwen2ForCausalLM", {**_LLAMA, "tie_word_embeddings": True},
        tags=("tied", "hf")),
    _lm("llama", "LlamaConfig", "LlamaForCausalLM", _LLAMA, tags=("hf",)),
    _lm("mixtral-moe", "MixtralConfig", "MixtralForCausalLM",
        {**_LLAMA, "num_local_experts": 4, "num_experts_per_tok": 2}, tags=("moe", "hf")),
    ZooModel("bart", StepSpec(_hf("BartConfig", "BartForConditionalGeneration", vocab_size=500, d_model=64,
                                  encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                                  decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                                  max_position_embeddings=64),
                              _seq2seq(500, 16), _hf_loss), (1, 4), frozenset({"tied", "encoder-decoder", "hf"})),
    ZooModel("vit", StepSpec(_hf("ViTConfig", "ViTForImageClassification", image_size=32, patch_size=8,
                                 hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                 num_labels=3),
                             _image(3, 32), _hf_loss), (1, 4), frozenset({"hf", "vision"})),
    ZooModel("resnet-bn", StepSpec(_hf("ResNetConfig", "ResNetForImageClassification", embedding_size=16,
                                       hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic", num_labels=3),
                                   _image(3, 32), _hf_loss), (1, 4), frozenset({"hf", "vision", "batchnorm"})),
    ZooModel("convnext", StepSpec(_hf("ConvNextConfig", "ConvNextForImageClassification", hidden_sizes=[16, 32],
                                      depths=[1, 1], num_labels=3, image_size=32, num_stages=2),
                                  _image(3, 32), _hf_loss), (1, 4), frozenset({"hf", "vision"})),
    ZooModel("unet2d", StepSpec(_unet, _unet_inputs, _sample), (1, 4), frozenset({"diffusers", "vision"})),
    # Its encoder's sinusoidal positions are a frozen parameter, on which MemTracker raises unless it is made a
    # buffer (mem_oracle does, for the oracle only).
    ZooModel("whisper", StepSpec(_whisper, _audio, _hf_loss), (1, 4),
             frozenset({"tied", "encoder-decoder", "hf", "frozen"})),
    _lm("gpt2-gc", "GPT2Config", "GPT2LMHeadModel", _GPT2, tags=("tied", "hf", "checkpoint"), prepare=_gc(False)),
    _lm("llama-gc-reentrant", "LlamaConfig", "LlamaForCausalLM", _LLAMA, tags=("hf", "checkpoint", "reentrant"),
        prepare=_gc(True)),
    _lm("gpt2-bf16-autocast", "GPT2Config", "GPT2LMHeadModel", _GPT2, tags=("tied", "hf", "autocast"),
        autocast=torch.bfloat16),
    _lm("llama-bf16", "LlamaConfig", "LlamaForCausalLM", _LLAMA, tags=("hf", "cast"), prepare=_half),
    _plain_model("tied-pair", TiedPair, lambda b: (b, 16), ids=512, tags=("tied",)),
    _plain_model("leaf-twice", LeafTwice, lambda b: (b, 256), tags=("tied",)),
    _plain_model("tiny-gpt", TinyGPT, lambda b: (b, 32), ids=512, tags=("tied",)),
    _plain_model("tiny-gpt-ckpt", lambda: TinyGPT(reentrant=False), lambda b: (b, 32), ids=512,
                 tags=("tied", "checkpoint")),
    _plain_model("tiny-gpt-ckpt-reentrant", lambda: TinyGPT(reentrant=True), lambda b: (b, 32), ids=512,
                 tags=("tied", "checkpoint", "reentrant")),
    _plain_model("gru-tagger", GRUTagger, lambda b: (b, 48), ids=200, tags=("rnn", "forward-peak")),
    _plain_model("lstm-lm", LSTMLM, lambda b: (b, 24), ids=300, tags=("rnn",)),
    _plain_model("conv-bn", ConvBN, lambda b: (b, 3, 32, 32), tags=("vision", "batchnorm")),
    _lm("roberta-mlm", "RobertaConfig", "RobertaForMaskedLM",
        dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
             max_position_embeddings=80), tags=("tied", "hf")),
    _plain_model("torch-encoder", lambda: nn.TransformerEncoder(
        nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True), 2, enable_nested_tensor=False),
        lambda b: (b, 24, 64), tags=("attention",)),
)


def by_name(name: str) -> ZooModel:
    for m in ZOO:
        if m.name == name:
            return m
    raise KeyError(f"no zoo model {name!r}; have {', '.join(m.name for m in ZOO)}")
