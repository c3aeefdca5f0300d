"""`record()` records the forward, not the model's construction: torch's initialisers run inside it unharmed,
and `graphviz-app render SCRIPT.py:FUNC` draws real models whose whole function (construction too) runs recorded."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from torch import nn

from graphviz_app import record, trace
from graphviz_app.cli.commands import main

CONSTRUCTIONS = [
    ("embedding with padding_idx", lambda: nn.Embedding(10, 4, padding_idx=0)),
    ("orthogonal init", lambda: nn.init.orthogonal_(torch.empty(4, 4))),
    ("orthogonal init of a parameter", lambda: nn.init.orthogonal_(nn.Linear(4, 4).weight)),
    ("sparse init", lambda: nn.init.sparse_(torch.empty(4, 4), 0.5)),
    ("LSTM", lambda: nn.LSTM(4, 4)),
    ("MultiheadAttention", lambda: nn.MultiheadAttention(8, 2)),
]


@pytest.mark.parametrize("build", [c[1] for c in CONSTRUCTIONS], ids=[c[0] for c in CONSTRUCTIONS])
def test_torch_initialisers_run_inside_record(build: object) -> None:
    torch.manual_seed(0)
    with record():
        made = build()  # type: ignore[operator]
    torch.manual_seed(0)
    expected = build()  # type: ignore[operator]
    got = made.state_dict() if isinstance(made, nn.Module) else {"t": made}
    want = expected.state_dict() if isinstance(expected, nn.Module) else {"t": expected}
    assert got.keys() == want.keys()
    assert all(torch.equal(got[k], want[k]) for k in got)  # the same weights as without record()


def test_a_model_built_inside_record_still_has_its_forward_recorded() -> None:
    with record():
        emb = nn.Embedding(10, 4, padding_idx=0)
        y = emb(torch.tensor([0, 3])).sum()
    graph = trace(y)
    assert [n.module for n in graph.nodes if n.name == "EmbeddingBackward0"] == ["Embedding"]
    assert emb.weight[0].abs().sum().item() == 0.0  # padding_idx's row zeroed, as torch does


def test_a_no_grad_view_changed_in_place_is_left_to_torch() -> None:
    base = torch.zeros(3, requires_grad=True)
    with record():
        with torch.no_grad():
            view = base[:2]
        with pytest.raises(RuntimeError, match="view was created in no_grad mode"):
            view.mul_(2)  # torch's own rule, raised by torch, not hidden and not ours


SCRIPTS = {
    "bert": """
        from transformers import BertConfig, BertModel
        cfg = BertConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=32, max_position_embeddings=32, pad_token_id=0)
        return BertModel(cfg), torch.randint(1, 64, (1, 8))
    """,
    "whisper": """
        from transformers import WhisperConfig, WhisperModel
        cfg = WhisperConfig(vocab_size=64, d_model=16, encoder_layers=1, decoder_layers=1,
                            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                            decoder_ffn_dim=32, num_mel_bins=8, max_source_positions=8, max_target_positions=16,
                            pad_token_id=0, decoder_start_token_id=1)
        return WhisperModel(cfg), (), {"input_features": torch.randn(1, 8, 16),
                                        "decoder_input_ids": torch.tensor([[1, 2, 3]])}
    """,
    "gemma3": """
        from transformers import Gemma3TextConfig, Gemma3ForCausalLM
        cfg = Gemma3TextConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                               num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                               max_position_embeddings=32, sliding_window=4, pad_token_id=0)
        return Gemma3ForCausalLM(cfg), torch.randint(1, 64, (1, 6))
    """,
    "rwkv": """
        from transformers import RwkvConfig, RwkvModel
        cfg = RwkvConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, attention_hidden_size=16,
                         intermediate_size=32, context_length=16)
        return RwkvModel(cfg), torch.randint(0, 64, (1, 6))
    """,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCRIPTS))
def test_cli_renders_a_real_model_built_inside_the_function(name: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("transformers")
    script = tmp_path / f"{name}_model.py"
    script.write_text("import torch\n\n\ndef build():\n    torch.manual_seed(0)\n"
                      + textwrap.indent(textwrap.dedent(SCRIPTS[name]).strip(), "    ") + "\n")
    out = tmp_path / f"{name}.json"
    code = main(["render", f"{script}:build", "-o", str(out), "--timeout", "600"])
    _, err = capsys.readouterr()
    assert code == 0, err
    from graphviz_app import Graph

    graph = Graph.from_json(out.read_text())
    assert len(graph.nodes) > 20
    assert any(n.module for n in graph.nodes)  # the forward was recorded, module by module


class _MakesItsActivation(nn.Module):
    """As transformers' Mamba fallback does: a module made on every call of forward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.SiLU()(self.fc(x))


def test_a_module_made_inside_forward_is_named_inside_its_caller() -> None:
    from graphviz_app import trace_model

    torch.manual_seed(0)
    graph = trace_model(nn.Sequential(_MakesItsActivation(), _MakesItsActivation()), torch.randn(1, 2))
    silu = {n.module for n in graph.nodes if n.name == "SiluBackward0"}
    assert silu == {"0.SiLU", "1.SiLU"}  # inside blocks 0 and 1, not a top-level "SiLU" beside the model
    assert {("0.SiLU", "SiLU"), ("1.SiLU", "SiLU")} <= {(m.name, m.type) for m in graph.modules}


def test_without_a_model_modules_are_still_named_by_class() -> None:
    block = _MakesItsActivation()
    with record():
        y = block(torch.randn(1, 2)).sum()
    assert {n.module for n in trace(y).nodes if n.name == "SiluBackward0"} == {"SiLU"}
