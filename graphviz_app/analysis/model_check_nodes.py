"""Which verdict of a model check each node of the traced graph belongs to, and its colour code."""

from __future__ import annotations

from ..model import Graph, NodeKind
from .model_check import ModelCheck, Status, UnitKind, Verdict

__all__ = ["CHECK_CODES", "check_code", "module_verdicts", "node_verdicts"]

# A verdict as the "check" colouring holds it (linear scale: worse is larger).
CHECK_CODES = {"passed": 0, "unchecked": 1, "explained": 2, "culprit": 3}


def check_code(verdict: Verdict) -> int:
    """0 passed, 1 not checked or not checkable, 2 failed because of a culprit inside, 3 the culprit.

    >>> check_code(Verdict("a", UnitKind.MODULE, "Linear", "Linear.forward", None, Status.PASSED))
    0
    """
    if verdict.status == Status.PASSED:
        return CHECK_CODES["passed"]
    if verdict.status != Status.FAILED:
        return CHECK_CODES["unchecked"]
    return CHECK_CODES["culprit"] if verdict.culprit else CHECK_CODES["explained"]


def module_verdicts(check: ModelCheck) -> dict[str, Verdict]:
    """Per module path, the verdict that speaks for the module: the worst of its calls and what it made.

    A culprit Function, hook or `.detach()` marks the module it lives in.
    """
    found: dict[str, Verdict] = {}
    for v in check.verdicts:
        held = found.get(v.path)
        rank = (check_code(v), v.kind == UnitKind.MODULE)
        if held is None or rank > (check_code(held), held.kind == UnitKind.MODULE):
            found[v.path] = v
    return found


def node_verdicts(graph: Graph, check: ModelCheck) -> dict[str, Verdict]:
    """Node id -> the verdict of the unit that made the node.

    An op made by a custom Function (`FusedAttentionBackward`) takes that Function's verdict;
    any other op and its saved tensors take their module's (`Node.module`): the verdict of a
    hook or `.detach()` found in the module's own code, else the worst of the module's calls.
    Nodes of no module, and leaves and outputs, are left out.
    """
    functions = {(v.path, v.type_name + "Backward"): v for v in check.verdicts if v.kind == UnitKind.FUNCTION}
    own: dict[str, Verdict] = {}
    for v in check.verdicts:
        if v.kind == UnitKind.FUNCTION:
            continue
        held = own.get(v.path)
        if held is None or _rank(v) > _rank(held):
            own[v.path] = v
    found: dict[str, Verdict] = {}
    for node in graph.nodes:
        if node.module is None or node.kind not in (NodeKind.OP, NodeKind.SAVED):
            continue
        verdict = functions.get((node.module, node.name)) or own.get(node.module)
        if verdict is not None:
            found[node.id] = verdict
    return found


def _rank(v: Verdict) -> tuple[bool, int]:
    """A hook or .detach() found guilty speaks for its module first; then the worst call."""
    return v.kind != UnitKind.MODULE and v.culprit, check_code(v)
