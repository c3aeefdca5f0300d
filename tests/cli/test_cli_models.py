"""The CLI on real models (transformers' GPT-2 and T5 built from small configs, random weights, never downloaded)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"  # before transformers loads: nothing is ever fetched

pytestmark = pytest.mark.slow  # transformers takes seconds to import

SCRIPT = '''\
import torch
from transformers import GPT2Config, GPT2LMHeadModel, T5Config, T5ForConditionalGeneration

torch.manual_seed(0)


def gpt2():
    return GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=32, n_head=2, vocab_size=100, n_positions=32,
                                      bos_token_id=0, eos_token_id=0))


def t5_model():
    return T5ForConditionalGeneration(T5Config(vocab_size=100, d_model=16, d_kv=8, d_ff=32, num_layers=2,
                                               num_heads=2, decoder_start_token_id=0))


def ids():
    return torch.randint(0, 100, (1, 8))


def loss_and_model():
    model, x = gpt2(), ids()
    return model(input_ids=x, labels=x).loss, model


def loss_and_named_parameters():
    model, x = gpt2(), ids()
    return model(input_ids=x, labels=x).loss, model.named_parameters()


def causal_lm_with_labels():
    model, x = gpt2(), ids()
    return model, (), {"input_ids": x, "labels": x}


def mapping_with_loss():
    model, x = gpt2(), ids()
    return {"model": model, "kwargs": {"input_ids": x, "labels": x}, "loss": lambda out: out.loss}


def mapping_with_args():
    model, x = gpt2(), ids()
    return {"model": model, "args": (x,), "loss": lambda out: out.logits.sum()}


def t5():
    x = ids()
    return t5_model(), (), {"input_ids": x, "decoder_input_ids": x}


def t5_positional():
    return t5_model(), ids()


def mapping_unknown_key():
    return {"model": gpt2(), "inputs": (ids(),)}


def mapping_bad_loss():
    return {"model": gpt2(), "args": (ids(),), "loss": 3}


def mapping_loss_fails():
    return {"model": gpt2(), "args": (ids(),), "loss": lambda out: out.nothing}
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("models")
    (root / "hf.py").write_text(SCRIPT)
    return root


def _render(models: Path, func: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict, str]:
    from graphviz_app.cli import commands as cli

    out = models / f"{func}.json"
    code = cli.main(["render", f"{models / 'hf.py'}:{func}", "-o", str(out), *extra])
    err = capsys.readouterr().err
    return code, (json.loads(out.read_text()) if code == 0 else {}), err


def _boxes(graph: dict) -> list[str]:
    return sorted(n["name"] for n in graph["nodes"] if n["kind"] == "module")


def _op_names(graph: dict) -> set[str]:
    return {n["name"] for n in graph["nodes"] if n["kind"] == "op"}


def test_loss_and_model_keeps_the_modules_and_rolls_gpt2_into_one_box(
    models: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    code, graph, err = _render(models, "loss_and_model", capsys, "--depth", "3", "--roll")
    assert code == 0, err
    assert "transformer.h.0–11: GPT2Block ×12" in _boxes(graph)
    assert len(graph["nodes"]) < 60  # 34 when drawn, not ~1,200 ops and 12 separate blocks
    assert "no module information" not in err


def test_it_draws_what_python_draws_with_record_trace_and_roll(
    models: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    import importlib.util

    import torch

    from graphviz_app import record, trace
    from graphviz_app.analysis.collapse import collapse

    spec = importlib.util.spec_from_file_location("hf_models", models / "hf.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    torch.manual_seed(0)
    model, x = module.gpt2(), module.ids()
    with record(model):
        loss = model(input_ids=x, labels=x).loss
    python = collapse(trace(loss, model), depth=3, roll=True)
    _, graph, _ = _render(models, "loss_and_model", capsys, "--depth", "3", "--roll")
    assert _boxes(graph) == sorted(n.name for n in python.nodes if n.kind.value == "module")
    assert len(graph["nodes"]) == len(python.nodes)


def test_named_parameters_still_names_the_leaves_without_modules(
    models: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    code, graph, err = _render(models, "loss_and_named_parameters", capsys, "--depth", "3")
    assert code == 0, err
    assert any(n["name"] == "transformer.wte.weight" for n in graph["nodes"])
    assert "no module information" in err  # named_parameters() carries no modules: the note says how to


@pytest.mark.parametrize("func", ["causal_lm_with_labels", "mapping_with_loss"])
def test_a_causal_lm_gets_its_labels_loss(models: Path, func: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, graph, err = _render(models, func, capsys, "--depth", "3", "--roll")
    assert code == 0, err
    assert "transformer.h.0–11: GPT2Block ×12" in _boxes(graph)
    code, flat, _ = _render(models, func, capsys)
    assert "NllLossBackward0" in _op_names(flat)  # the loss the labels made is in the graph


def test_the_mapping_loss_function_picks_what_is_traced(models: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, graph, err = _render(models, "mapping_with_args", capsys)
    assert code == 0, err
    outputs = [n for n in graph["nodes"] if n["kind"] == "output"]
    assert len(outputs) == 1 and "SumBackward0" in _op_names(graph)  # logits.sum(), not every model output


def test_t5_gets_input_ids_and_decoder_input_ids_as_keywords(models: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, graph, err = _render(models, "t5", capsys, "--depth", "0")
    assert code == 0, err
    assert {"encoder: T5Stack", "decoder: T5Stack"} <= {b.split(" (")[0] for b in _boxes(graph)}, _boxes(graph)


@pytest.mark.parametrize(
    ("func", "message"),
    [
        ("t5_positional", r"calling the returned model on its inputs raised ValueError: You must specify exactly one "
                          r"of input_ids or inputs_embeds; a model that takes keyword arguments gets them as "
                          r"return model, \(\), \{'input_ids': ids, \.\.\.\}"),
        ("mapping_unknown_key", r"returned a mapping with the key\(s\) 'inputs'; it takes 'model', 'args', 'kwargs', "
                                r"'loss'"),
        ("mapping_bad_loss", r"'loss' must be a function of the model's output, found int"),
        ("mapping_loss_fails", r"the returned 'loss' function, called on the model's output, raised AttributeError"),
    ],
)
def test_forms_that_cannot_work_say_what_to_return(
    models: Path, func: str, message: str, capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = _render(models, func, capsys)
    assert code == 2
    assert re.search(message, err), err
