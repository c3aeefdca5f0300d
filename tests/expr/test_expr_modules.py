"""nn modules in programs: what they compute, what is refused, and how the traced graph names them."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import torch

from graphviz_app import trace
from graphviz_app.expr import ExprError, evaluate, validate
from graphviz_app.expr.limits import Limits
from graphviz_app.model import NodeKind
from graphviz_app.tracing.recorder import record


def refused(program: str, *, limits: Limits = Limits()) -> ExprError:
    with pytest.raises(ExprError) as info:
        evaluate(program, limits=limits)
    return info.value


# What modules compute ------------------------------------------------------------
def test_a_module_program_computes_what_the_same_torch_code_computes() -> None:
    ev = evaluate("torch.manual_seed(0)\nlin = nn.Linear(3, 2)\nx = torch.ones(4, 3)\nlin(x).relu().sum()")
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    assert ev.output.item() == pytest.approx(lin(torch.ones(4, 3)).relu().sum().item())


@pytest.mark.parametrize(
    "program",
    [
        "c = nn.Conv2d(3, 4, 3, padding=1)\nb = nn.BatchNorm2d(4)\nb(c(torch.randn(2, 3, 8, 8))).sum()",
        "n = nn.LayerNorm(8)\ng = nn.GELU()\ng(n(torch.randn(2, 8))).sum()",
        "b = nn.BatchNorm1d(8)\nt = nn.Tanh()\nt(b(torch.randn(4, 8))).sum()",
        "e = nn.Embedding(10, 4)\ne(torch.tensor([1, 2, 3])).sum()",
        "m = nn.MultiheadAttention(8, 2)\nx = torch.randn(3, 2, 8)\no = m(x, x, x)[0]\no.sum()",
        "l = nn.LSTM(4, 8, num_layers=2)\nl(torch.randn(5, 2, 4))[0].sum()",
        "g = torch.nn.GRU(4, 8)\ng(torch.randn(5, 2, 4))[0].sum()",
        "d = nn.Dropout(0.5)\nr = nn.ReLU()\nd(r(torch.randn(8, requires_grad=True))).sum()",
        "s = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))\ns(torch.randn(2, 4)).sum()",
        "ls = nn.ModuleList([nn.Linear(4, 4), nn.Linear(4, 4)])\nh = torch.randn(2, 4)\n"
        "for i in range(2):\n    h = ls[i](h)\nh.sum()",
        "layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)\nenc = nn.TransformerEncoder(layer, 2)\n"
        "enc(torch.randn(3, 2, 8)).sum()",
    ],
)
def test_each_allowed_module_builds_and_runs(program: str) -> None:
    ev = evaluate(program)
    assert ev.output.grad_fn is not None and ev.model is not None


def test_modules_take_the_programs_default_dtype() -> None:
    ev = evaluate("lin = nn.Linear(2, 2)\nlin(torch.ones(1, 2)).sum()", dtype="float64")
    assert ev.output.dtype == torch.float64
    assert {p.dtype for p in ev.model.parameters()} == {torch.float64}


def test_weight_and_bias_are_readable_for_weight_tying() -> None:
    ev = evaluate("emb = nn.Embedding(5, 3)\nh = emb(torch.tensor([0, 1]))\n(h @ emb.weight.T).sum()")
    ev.output.backward()
    assert ev.model.emb.weight.grad is not None


def test_sequential_indexing_and_slicing_share_the_same_layers() -> None:
    ev = evaluate("s = nn.Sequential(nn.Linear(2, 2), nn.ReLU(), nn.Linear(2, 2))\nx = torch.ones(1, 2)\n"
                  "(s[2](s[0:2](x)) - s(x)).abs().sum()")
    assert ev.output.item() == 0.0


# Refused: internals, size, in place, bombs -----------------------------------------
@pytest.mark.parametrize(
    ("program", "message"),
    [
        ("lin = nn.Linear(2, 2)\nlin.register_forward_hook(lin)\ntorch.ones(1)",
         r"lin\.register_forward_hook is not on the allow-list"),
        ("lin = nn.Linear(2, 2)\nlin._forward_hooks\ntorch.ones(1)", r"starting with _ are not allowed"),
        ("lin = nn.Linear(2, 2)\nlin.__dict__\ntorch.ones(1)", r"starting with _ are not allowed"),
        ("lin = nn.Linear(2, 2)\nlin.apply(lin)\ntorch.ones(1)", r"lin\.apply is not on the allow-list"),
        ("lin = nn.Linear(2, 2)\nlin.load_state_dict(1)\ntorch.ones(1)",
         r"lin\.load_state_dict is not on the allow-list"),
        ("lin = nn.Linear(2, 2)\nlin.state_dict()\ntorch.ones(1)", r"lin\.state_dict is not on the allow-list"),
        ("lin = nn.Linear(2, 2)\nlin.weight.register_hook(1)\ntorch.ones(1)", r"hooks run Python functions"),
        ("lin = nn.Linear(2, 2)\nlin.weight.grad_fn\ntorch.ones(1)", r"autograd internals"),
        ("lin = nn.Linear(2, 2)\nlin.to('cuda')\ntorch.ones(1)",
         r"lin\.to: a module's only readable attributes are lin\.bias and lin\.weight"),
        ("lin = nn.Linear(2, 2)\nlin.cpu()\ntorch.ones(1)", r"only readable attributes"),
        ("lin = nn.Linear(2, 2)\nlin.eval()\ntorch.ones(1)", r"eval"),
        ("lin = nn.Linear(2, 2)\nlin.T\ntorch.ones(1)", r"lin\.T: a module's only readable attributes"),
        ("m = nn.MultiheadAttention(4, 2)\nm.weight\ntorch.ones(1)", r"m\.weight: a MultiheadAttention has no weight"),
        ("lin = nn.Linear(2, 2, device='meta')\ntorch.ones(1)",
         r"device must be 'cpu', 'cuda' or 'cuda:N', found 'meta'"),
        ("lin = nn.Linear(2, 2)\nlin(lin)", r"a module takes tensors, not another module"),
        ("lin = nn.Linear(2, 2)\nm = nn.Linear(lin, 2)\ntorch.ones(1)", r"takes sizes and options, not a module"),
        ("s = nn.Sequential(torch.ones(2))\ntorch.ones(1)", r"holds modules only, found a Tensor"),
        ("x = torch.ones(2)\nx(1)", r"x\(\.\.\.\) is not an allowed function: only a variable holding an nn module"),
        ("lin = nn.Linear(2, 2)\nlin", r"found a module \(Linear\): call it, e.g. lin\(x\)"),
        ("r = nn.ReLU()\nr[0]", r"only nn\.Sequential and nn\.ModuleList can be indexed, not ReLU"),
        ("s = nn.Sequential(nn.ReLU())\ns[3]", r"s\[3\] is out of range: it holds 1 modules"),
        ("l = nn.Linear\ntorch.ones(1)", r"nn\.Linear is a function: call it"),
        ("l = nn.Module()\ntorch.ones(1)", r"nn\.Module is not on the allow-list"),
        ("l = nn.Parameter(torch.ones(1))\ntorch.ones(1)", r"nn\.Parameter is not on the allow-list"),
        ("l = torch.nn.utils\ntorch.ones(1)", r"torch\.nn\.utils is not allowed"),
    ],
)
def test_module_internals_are_out_of_reach(program: str, message: str) -> None:
    assert pytest.raises(ExprError, evaluate, program).match(message)


def test_a_huge_linear_is_refused_before_its_weight_is_allocated(monkeypatch: pytest.MonkeyPatch) -> None:
    real_empty = torch.empty
    sizes: list[int] = []

    def watching_empty(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        t = real_empty(*args, **kwargs)
        if t.device.type != "meta":
            sizes.append(t.numel())
        return t

    monkeypatch.setattr(torch, "empty", watching_empty)
    err = refused("lin = nn.Linear(10**6, 10**6)\ntorch.ones(1)")
    assert err.kind == "limit" and err.line == 1
    assert "1,000,000,000,000 elements" in err.message and "Limits.max_tensor_elements" in err.message
    assert not any(n >= 10**12 for n in sizes)


def test_many_modules_within_the_element_limit_are_refused_by_total_bytes() -> None:
    program = "a = nn.Linear(3000, 3000)\nb = nn.Linear(3000, 3000)\nc = nn.Linear(3000, 3000)\ntorch.ones(1)"
    err = refused(program)
    assert err.line == 3 and "Limits.max_total_bytes" in err.message


def test_a_transformer_encoder_is_charged_for_every_copy_of_its_layer() -> None:
    program = "l = nn.TransformerEncoderLayer(256, 4, 1024)\ne = nn.TransformerEncoder(l, 40)\ntorch.ones(1)"
    err = refused(program)
    assert err.line == 2 and "Limits.max_total_bytes" in err.message


@pytest.mark.parametrize(
    ("program", "message"),
    [
        ("r = nn.ReLU(True)\nx = torch.ones(2, requires_grad=True)\nr(x * 1)", r"inplace=True"),
        ("d = nn.Dropout(0.5, True)\nd(torch.ones(2))", r"inplace=True"),
        ("r = nn.ReLU(inplace=True)\nr(torch.ones(2))", r"inplace= is not allowed"),
        ("e = nn.Embedding(10, 3, None, 1.0)\ne(torch.arange(3))",
         r"max_norm renormalizes rows of the weight in place"),
        ("e = nn.Embedding(10, 3, max_norm=1.0)\ne(torch.arange(3))", r"max_norm renormalizes"),
    ],
)
def test_modules_that_would_change_tensors_in_place_are_refused(program: str, message: str) -> None:
    assert pytest.raises(ExprError, evaluate, program).match(message)


@pytest.mark.parametrize(
    ("program", "message"),
    [
        # a module inside itself, doubled 40 times: 2**41 forwards from 41 objects
        ("l = nn.Linear(2, 2)\ns = nn.Sequential(l, l)\nfor i in range(40):\n    s = nn.Sequential(s, s)\n"
         "s(torch.ones(2)).sum()", r"would run 16,383 module forwards per call.*the limit is 10,000"),
        ("l = nn.Linear(2, 2)\ns = nn.Sequential(l)\nfor i in range(30):\n    s = nn.Sequential(s)\n"
         "s(torch.ones(2)).sum()",
         r"nests modules 17 levels deep; the limit is 16"),
        ("s = nn.Sequential(*[nn.Linear(2, 2)] * 10**6)\ntorch.ones(1)", r"\* unpacking is not allowed"),
        ("l = nn.ReLU()\ns = nn.Sequential([l] * 10**6)\ntorch.ones(1)", r"would make a list of 1,000,000 items"),
        ("l = nn.ReLU()\nls = [l] * 20000\ns = nn.Sequential(ls)\ntorch.ones(1)", r"20,001 module forwards"),
        ("l = nn.TransformerEncoderLayer(8, 2, 16)\ne = nn.TransformerEncoder(l, 10**9)\ntorch.ones(1)",
         r"would run 10,000,000,001 module forwards"),
        ("l = nn.LSTM(8, 8, 10**6)\ntorch.ones(1)", r"asks for 1,000,000 stacked layers; at most 64"),
        ("l = nn.GRU(8, 8, num_layers=1000)\ntorch.ones(1)", r"asks for 1,000 stacked layers"),
    ],
)
def test_module_bombs_are_refused_before_they_run(program: str, message: str) -> None:
    err = refused(program)
    assert err.kind == "limit" or "unpacking" in err.message
    assert re.search(message, err.message), err.message


def test_a_module_call_whose_saved_tensors_break_the_budget_is_refused_before_it_runs() -> None:
    program = "l = nn.Linear(2000, 2000)\nx = torch.ones(2000, 2000)\nfor i in range(10):\n    x = l(x)\nx.sum()"
    err = refused(program)
    assert err.line == 4 and "every tensor its forward keeps for backward" in err.message
    assert "Limits.max_total_bytes" in err.message


def test_a_module_call_with_too_many_multiply_adds_is_refused() -> None:
    err = refused("c = nn.Conv2d(64, 64, 3)\nc(torch.ones(4, 64, 64, 64)).sum()",
                  limits=Limits(max_multiply_adds=10**8))
    assert "multiply-adds" in err.message and "Limits.max_multiply_adds" in err.message


def test_validate_accepts_module_programs_and_refuses_module_internals_as_you_type() -> None:
    assert validate(
        "enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2), 2)\nenc(torch.ones(3, 1, 8)).sum()"
    ) is None
    with pytest.raises(ExprError, match=r"line 2, col 1: lin.register_forward_hook is not on the allow-list"):
        validate("lin = nn.Linear(2, 2)\nlin.register_forward_hook(lin)")


# Module names and program lines in the traced graph --------------------------------
ENCODER = (
    "torch.manual_seed(0)\n"
    "layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)\n"
    "enc = nn.TransformerEncoder(layer, 2)\n"
    "head = nn.Linear(8, 1)\n"
    "x = torch.randn(3, 2, 8, requires_grad=True)\n"
    "h = enc(x)\n"
    "head(h).relu().mean()\n"
)


def traced(program: str):  # noqa: ANN201
    ev = evaluate(program)
    return ev, trace(ev.output, ev.params, names=ev.variables)


def test_module_names_start_with_the_variable_name() -> None:
    _, graph = traced(ENCODER)
    modules = {n.module for n in graph.nodes if n.module}
    assert "enc.layers.0.linear1" in modules and "enc.layers.1.self_attn" in modules and "head" in modules
    types = {m.name: m.type for m in graph.modules}
    assert types["enc.layers.0"] == "TransformerEncoderLayer" and types["head"] == "Linear"


def test_leaves_are_named_by_parameter_path_and_variables_by_name() -> None:
    _, graph = traced(ENCODER)
    leaves = {n.name: n.module for n in graph.of_kind(NodeKind.LEAF)}
    assert leaves["enc.layers.0.linear1.weight"] == "enc.layers.0.linear1"
    assert leaves["head.bias"] == "head"
    assert "x" in leaves and leaves["x"] is None  # an input belongs to no module


def test_every_op_carries_the_program_line_that_made_it() -> None:
    _, graph = traced(ENCODER)
    ops = list(graph.of_kind(NodeKind.OP))
    by_module = {n.module.split(".")[0] if n.module else None: n.source for n in ops}
    assert by_module["enc"] == "program:6"  # h = enc(x)
    assert by_module["head"] == "program:7"
    assert by_module[None] == "program:7"  # .relu().mean() outside any module
    assert all(n.source and n.source.startswith("program:") for n in ops)


def test_attribution_matches_an_independent_recording_of_the_same_modules() -> None:
    # The reference: the same modules called as plain torch code under record().
    program = "torch.manual_seed(0)\nnet = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))\n" \
              "x = torch.randn(3, 4)\nnet(x).sum()"
    _, graph = traced(program)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    x = torch.randn(3, 4)
    with record(net):
        out = net(x).sum()
    reference = trace(out, net)
    ours = Counter((n.module, n.name) for n in graph.of_kind(NodeKind.OP))
    theirs = Counter((f"net.{n.module}" if n.module else ("net" if n.module == "" else None), n.name)
                     for n in reference.of_kind(NodeKind.OP))
    assert ours == theirs


def test_a_program_without_modules_is_traced_as_before() -> None:
    ev, graph = traced("x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()")
    assert ev.model is None and not graph.modules
    assert all(n.module is None and n.source is None for n in graph.nodes)


def test_an_anonymous_module_shares_no_name_with_a_variable() -> None:
    ev = evaluate("s = nn.Sequential(nn.Linear(2, 2))\nlin = s[0]\nlin(torch.ones(1, 2)).sum()")
    graph = trace(ev.output, ev.params, names=ev.variables)
    # the container's name wins
    assert {n.module for n in graph.of_kind(NodeKind.OP) if n.name != "SumBackward0"} == {"s.0"}


# The command line ------------------------------------------------------------------
def test_the_cli_expression_mode_draws_modules_with_depth_and_roll(tmp_path, capsys) -> None:  # noqa: ANN001
    from graphviz_app.cli import commands as cli

    out = tmp_path / "enc.dot"
    code = cli.main(["render", "enc(x).sum()", "--var", "layer=nn.TransformerEncoderLayer(8, 2, 16)",
                     "--var", "enc=nn.TransformerEncoder(layer, 4)",
                     "--var", "x=torch.randn(3, 2, 8, requires_grad=True)",
                     "-o", str(out), "--depth", "3", "--roll"])
    stdout, stderr = capsys.readouterr()
    assert code == 0, stderr
    assert "drawn as" in stdout
    assert "enc.layers.0–3: TransformerEncoderLayer ×4" in out.read_text()


def test_the_cli_says_how_to_get_modules_into_an_expression(tmp_path, capsys) -> None:  # noqa: ANN001
    from graphviz_app.cli import commands as cli

    code = cli.main(["render", "(x * 2).sum()", "--var", "x=torch.ones(2, requires_grad=True)",
                     "-o", str(tmp_path / "x.dot"), "--depth", "1"])
    assert code == 0
    assert 'build the layers with nn.* modules, e.g. --var "lin=nn.Linear(3, 2)"' in capsys.readouterr().err


def test_a_program_tensor_cannot_become_a_modules_parameter() -> None:
    # nn.Embedding's eighth positional argument is _weight: the program's tensor as its weight.
    err = refused("w = torch.ones(2, 2)\ne = nn.Embedding(2, 2, None, None, 2.0, False, False, w)\ntorch.ones(1)")
    assert "takes sizes and options, not tensors" in err.message and err.line == 2


def test_a_call_torch_cannot_size_on_meta_is_stopped_by_a_guard_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from graphviz_app.expr import modules

    def no_meta(value):  # noqa: ANN001, ANN202
        raise RuntimeError("no meta kernel")

    monkeypatch.setattr(modules, "to_meta", no_meta)
    ok = evaluate("l = nn.Linear(3, 2)\nl(torch.ones(4, 3, requires_grad=True)).sum()")
    assert ok.output.grad_fn is not None
    err = refused("l = nn.Linear(2000, 2000)\nx = torch.ones(2000, 2000)\nfor i in range(10):\n    x = l(x)\nx.sum()")
    assert err.line == 4 and "(on the way)" in err.message and "Limits.max_total_bytes" in err.message


def test_modules_in_a_plain_list_are_named_by_the_list_and_their_index() -> None:
    ev, graph = traced("layers = [nn.Linear(2, 2), nn.Linear(2, 2)]\nh = torch.ones(1, 2)\n"
                       "for i in range(2):\n    h = layers[i](h)\nh.sum()")
    assert {n.module for n in graph.of_kind(NodeKind.OP) if n.module} == {"layers.0", "layers.1"}
    assert {n.name for n in graph.of_kind(NodeKind.LEAF)} >= {"layers.0.weight", "layers.1.bias"}


def test_a_program_using_only_nn_functional_has_no_model() -> None:
    ev, graph = traced("x = torch.ones(3, requires_grad=True)\nnn.functional.relu(x).sum()")
    assert ev.model is None and not graph.modules
    assert [n.name for n in graph.of_kind(NodeKind.LEAF)] == ["x"]
