"""A model check's records without torch: the report's first line, the JSON, each node's verdict."""

from __future__ import annotations

import json

import pytest

from graphviz_app.analysis.model_check import ModelCheck, Status, UnitKind, Verdict
from graphviz_app.analysis.model_check_nodes import CHECK_CODES, check_code, module_verdicts, node_verdicts
from graphviz_app.model import Edge, EdgeKind, Graph, Node, NodeKind

CULPRIT = Verdict("blocks.3.attn", UnitKind.FUNCTION, "FusedAttention", "FusedAttention.backward", "model.py:41",
                  Status.FAILED, culprit=True, input="query input", ratio=1.02, abs_error=0.3, rel_error=0.02,
                  element="element (0, 1) of shape (2, 4)")
ATTN = Verdict("blocks.3.attn", UnitKind.MODULE, "Attention", "Attention.forward", "model.py:30", Status.FAILED,
               depth=2, explained_by="blocks.3.attn (FusedAttention.backward)")
MLP = Verdict("blocks.3.mlp", UnitKind.MODULE, "MLP", "MLP.forward", "model.py:60", Status.PASSED, depth=2)
CODES = Verdict("codes", UnitKind.MODULE, "Codes", "Codes.forward", "model.py:70", Status.NOT_CHECKABLE,
                reason="nothing to differentiate", depth=1)
ROOT = Verdict("", UnitKind.MODULE, "Net", "Net.forward", "model.py:80", Status.FAILED,
               explained_by="blocks.3.attn (FusedAttention.backward)")


def _check(*verdicts: Verdict) -> ModelCheck:
    return ModelCheck(verdicts=verdicts, model_type="Net", strategy="all", modes=("rev",), order=1, kinks="pass",
                      probes=12, evaluations=100, seconds=1.5, budget_spent=False)


def test_the_first_line_names_the_culprit_as_the_reader_looks_for_it() -> None:
    check = _check(CULPRIT, MLP, ATTN, CODES, ROOT)
    assert str(check).splitlines()[0] == (
        "blocks.3.attn (FusedAttention.backward, model.py:41): backward is 1.02 x finite differences "
        "for the query input")
    assert not check.passed and check.culprits == (CULPRIT,)
    assert "  codes (Codes.forward, model.py:70): not checkable: nothing to differentiate" in str(check)
    assert str(check).splitlines()[1] == "  blocks.3.attn: at element (0, 1) of shape (2, 4)"
    assert check.counts() == {"passed": 1, "failed": 3, "detached": 0, "not checkable": 1, "not checked": 0}


@pytest.mark.parametrize("verdict, words", [
    (Verdict("a", UnitKind.MODULE, "A", "A.forward", None, Status.FAILED, culprit=True, abs_error=0.5,
             rel_error=0.25, input="x input"),
     "a (A.forward): backward differs from finite differences by 0.5 (relative 0.25) for the x input"),
    (Verdict("a", UnitKind.HOOK, "A", "hook scale", "m.py:3", Status.FAILED, culprit=True),
     "a (hook scale, m.py:3): this tensor hook changes the gradient"),
    (Verdict("a", UnitKind.DETACH, "A", ".detach()", "m.py:4", Status.FAILED, culprit=True),
     "a (.detach(), m.py:4): this .detach() cuts a gradient that finite differences see"),
    (Verdict("a", UnitKind.FUNCTION, "F", "F.backward", "m.py:5", Status.FAILED, culprit=True, ratio=1.5,
             failed_check="fwd", input="x input"),
     "a (F.backward, m.py:5): forward mode (jvp) is 1.5 x finite differences for the x input"),
    (Verdict("a", UnitKind.MODULE, "A", "A.forward", "m.py:6", Status.FAILED, culprit=True,
             reason="backward raised RuntimeError: one of the variables needed"),
     "a (A.forward, m.py:6): backward failed: backward raised RuntimeError: one of the variables needed"),
    (Verdict("", UnitKind.MODULE, "A", "A.forward", "m.py:7", Status.PASSED, call=1, calls=3),
     "(model) (call 2 of 3) (A.forward, m.py:7): passed"),
])
def test_each_finding_reads_as_one_line(verdict: Verdict, words: str) -> None:
    assert verdict.headline() == words


def test_a_check_with_no_culprit_says_what_passed() -> None:
    assert _check(MLP, CODES).first_line() == (
        "Net: every checked backward agrees with finite differences (1 passed, 1 not checkable, 0 not checked)")
    assert _check(CODES).first_line() == "nothing was checked: 1 unit(s) not checkable, 0 not checked"


def test_the_json_round_trips_with_non_finite_errors_as_strings() -> None:
    odd = Verdict("b", UnitKind.MODULE, "B", "B.forward", None, Status.FAILED, culprit=True,
                  abs_error=float("inf"), reason="a probe is NaN or infinite")
    data = json.loads(json.dumps(_check(odd, ROOT).to_dict(), allow_nan=False))
    assert data["verdicts"][0]["abs_error"] == "inf" and data["passed"] is False
    assert data["first_line"] == "b (B.forward): backward failed: a probe is NaN or infinite"


def test_each_node_takes_the_verdict_of_the_function_or_module_that_made_it() -> None:
    graph = Graph((
        Node("n0", NodeKind.OUTPUT, "output"),
        Node("n1", NodeKind.OP, "FusedAttentionBackward", module="blocks.3.attn"),
        Node("n2", NodeKind.OP, "MmBackward0", module="blocks.3.attn"),
        Node("n3", NodeKind.OP, "AddBackward0", module="blocks.3.mlp"),
        Node("n4", NodeKind.OP, "MulBackward0", module=None),
        Node("n5", NodeKind.LEAF, "weight", module="blocks.3.mlp"),
    ), (Edge("n1", "n0", EdgeKind.DATA),))
    check = _check(CULPRIT, MLP, ATTN, ROOT)
    found = node_verdicts(graph, check)
    assert {k: check_code(v) for k, v in found.items()} == {
        "n1": CHECK_CODES["culprit"], "n2": CHECK_CODES["explained"], "n3": CHECK_CODES["passed"]}
    assert module_verdicts(check)["blocks.3.attn"] is CULPRIT  # the module's box is marked


def test_a_hook_found_in_a_module_marks_that_module_s_own_nodes() -> None:
    hook = Verdict("blocks.3.mlp", UnitKind.HOOK, "MLP", "hook scale", "model.py:63", Status.FAILED, culprit=True)
    mlp = Verdict("blocks.3.mlp", UnitKind.MODULE, "MLP", "MLP.forward", "model.py:60", Status.FAILED,
                  explained_by="blocks.3.mlp (hook scale)")
    graph = Graph((Node("n0", NodeKind.OP, "AddBackward0", module="blocks.3.mlp"),), ())
    assert node_verdicts(graph, _check(hook, mlp, ROOT))["n0"] is hook
