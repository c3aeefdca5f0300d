"""Small GPT-2-, BERT- and Llama-shaped language models built from torch.nn, as transformers writes them.

Each follows the library's modeling code op for op where it matters to the
graph: GPT-2's fused c_attn split into q/k/v, a causal mask, tanh-GELU and an
lm_head tied to the token embedding; BERT's separate q/k/v projections, an
additive padding mask and a masked-LM head tied to the word embedding; Llama's
RMSNorm, rotary embeddings on q and k, grouped-query attention and a SiLU-gated
MLP. Nothing is downloaded; weights are random.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["Gpt2", "Bert", "Llama", "LANGUAGE_MODELS", "batch", "loss_of"]

VOCAB, WIDTH, HEADS, LAYERS, POSITIONS = 64, 32, 4, 2, 16


class Gpt2Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c_attn = nn.Linear(WIDTH, 3 * WIDTH)
        self.c_proj = nn.Linear(WIDTH, WIDTH)
        self.register_buffer("bias", torch.tril(torch.ones(POSITIONS, POSITIONS, dtype=torch.bool)), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.c_attn(x).split(d, dim=2)
        q, k, v = (t.view(b, n, HEADS, d // HEADS).transpose(1, 2) for t in (q, k, v))
        w = q @ k.transpose(-1, -2) / torch.full([], (d // HEADS) ** 0.5, dtype=x.dtype)
        w = torch.where(self.bias[:n, :n], w, torch.finfo(w.dtype).min).softmax(-1)
        return self.c_proj((w @ v).transpose(1, 2).reshape(b, n, d))


class Gpt2Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(WIDTH)
        self.attn = Gpt2Attention()
        self.ln_2 = nn.LayerNorm(WIDTH)
        self.c_fc = nn.Linear(WIDTH, 4 * WIDTH)
        self.c_proj = nn.Linear(4 * WIDTH, WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    """GPT2LMHeadModel's shape: wte + wpe, blocks, ln_f, lm_head tied to wte."""

    def __init__(self) -> None:
        super().__init__()
        self.wte = nn.Embedding(VOCAB, WIDTH)
        self.wpe = nn.Embedding(POSITIONS, WIDTH)
        self.h = nn.ModuleList(Gpt2Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(WIDTH)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.wte(ids) + self.wpe(torch.arange(ids.shape[1]))
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # weight tying: the embedding is the output layer


class BertLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.query, self.key, self.value = nn.Linear(WIDTH, WIDTH), nn.Linear(WIDTH, WIDTH), nn.Linear(WIDTH, WIDTH)
        self.attention_output = nn.Linear(WIDTH, WIDTH)
        self.attention_norm = nn.LayerNorm(WIDTH)
        self.intermediate = nn.Linear(WIDTH, 4 * WIDTH)
        self.output = nn.Linear(4 * WIDTH, WIDTH)
        self.output_norm = nn.LayerNorm(WIDTH)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = (p(x).view(b, n, HEADS, d // HEADS).transpose(1, 2) for p in (self.query, self.key, self.value))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // HEADS) + mask
        context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d)
        x = self.attention_norm(x + self.attention_output(context))
        return self.output_norm(x + self.output(F.gelu(self.intermediate(x))))


class Bert(nn.Module):
    """BertForMaskedLM's shape: three embeddings and a LayerNorm, layers, a head tied to the word embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(VOCAB, WIDTH)
        self.position_embeddings = nn.Embedding(POSITIONS, WIDTH)
        self.token_type_embeddings = nn.Embedding(2, WIDTH)
        self.embeddings_norm = nn.LayerNorm(WIDTH)
        self.layer = nn.ModuleList(BertLayer() for _ in range(LAYERS))
        self.transform = nn.Linear(WIDTH, WIDTH)
        self.transform_norm = nn.LayerNorm(WIDTH)
        self.decoder_bias = nn.Parameter(torch.zeros(VOCAB))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        n = ids.shape[1]
        x = self.word_embeddings(ids) + self.position_embeddings(torch.arange(n))
        x = self.embeddings_norm(x + self.token_type_embeddings(torch.zeros_like(ids)))
        padding = torch.ones_like(ids, dtype=torch.float32)
        mask = (1.0 - padding[:, None, None, :]) * torch.finfo(torch.float32).min
        for layer in self.layer:
            x = layer(x, mask)
        h = self.transform_norm(F.gelu(self.transform(x)))
        return F.linear(h, self.word_embeddings.weight, self.decoder_bias)


class RmsNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(WIDTH))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class LlamaAttention(nn.Module):
    KV_HEADS = 2

    def __init__(self) -> None:
        super().__init__()
        head = WIDTH // HEADS
        self.q_proj = nn.Linear(WIDTH, WIDTH, bias=False)
        self.k_proj = nn.Linear(WIDTH, self.KV_HEADS * head, bias=False)
        self.v_proj = nn.Linear(WIDTH, self.KV_HEADS * head, bias=False)
        self.o_proj = nn.Linear(WIDTH, WIDTH, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        head = d // HEADS
        q = self.q_proj(x).view(b, n, HEADS, head).transpose(1, 2)
        k = self.k_proj(x).view(b, n, self.KV_HEADS, head).transpose(1, 2)
        v = self.v_proj(x).view(b, n, self.KV_HEADS, head).transpose(1, 2)
        q, k = q * cos + _rotate_half(q) * sin, k * cos + _rotate_half(k) * sin  # the same rotation on q and k
        k, v = (t.repeat_interleave(HEADS // self.KV_HEADS, dim=1) for t in (k, v))
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, n, d))


class LlamaLayer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.input_layernorm = RmsNorm()
        self.self_attn = LlamaAttention()
        self.post_attention_layernorm = RmsNorm()
        self.gate_proj = nn.Linear(WIDTH, 2 * WIDTH, bias=False)
        self.up_proj = nn.Linear(WIDTH, 2 * WIDTH, bias=False)
        self.down_proj = nn.Linear(2 * WIDTH, WIDTH, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    """LlamaForCausalLM's shape: embed_tokens, rotary cos/sin, layers, norm, an untied lm_head."""

    def __init__(self) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(VOCAB, WIDTH)
        self.layers = nn.ModuleList(LlamaLayer() for _ in range(LAYERS))
        self.norm = RmsNorm()
        self.lm_head = nn.Linear(WIDTH, VOCAB, bias=False)
        head = WIDTH // HEADS
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, head, 2).float() / head), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        angles = torch.arange(ids.shape[1]).float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat((angles, angles), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


LANGUAGE_MODELS = {"gpt2": Gpt2, "bert": Bert, "llama": Llama}


def batch(seed: int) -> torch.Tensor:
    """Token ids of one batch: 2 sequences of 12 tokens."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, VOCAB, (2, 12), generator=generator)


def loss_of(model: nn.Module, ids: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy, as the causal-LM heads compute it with `labels=ids`."""
    logits = model(ids)
    return F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
