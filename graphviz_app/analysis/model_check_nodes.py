"""Which verdict of a model check each node and module of the traced graph belongs to, and its colour code."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ..model import Graph, NodeKind
from ..model.checks import Status, UnitKind, Verdict
from .model_check import ModelCheck

__all__ = ["CHECK_CODES", "check_code", "check_finding", "module_verdicts", "node_verdicts", "with_check",
           "verdicts_of"]

# A verdict as the "check" colouring holds it (linear scale: worse is larger).
CHECK_CODES = {"passed": 0, "unchecked": 1, "detached": 2, "explained": 3, "culprit": 4}

Verdicts = ModelCheck | Graph | Iterable[Verdict]


def verdicts_of(source: Verdicts) -> tuple[Verdict, ...]:
    """The verdicts of a `ModelCheck`, of a graph that carries them (`Graph.checks`), or given as they are."""
    if isinstance(source, ModelCheck):
        return source.verdicts
    if isinstance(source, Graph):
        return source.checks
    return tuple(source)


def with_check(graph: Graph, check: ModelCheck) -> Graph:
    """`graph` carrying `check`'s verdicts (`Graph.checks`): saved as .json or .html, it shows them.

    The viewer colours boxes and nodes by verdict ("check") and lists it per module in its
    table; `graph.summary()` and `graph.module_summary()` print them; `render(graph)` marks
    the culprit. Verdicts about modules the graph does not show are kept all the same.

    Raises:
        TypeError: `check` is not what `check_model` returns.
    """
    if not isinstance(check, ModelCheck):
        raise TypeError(f"with_check(graph, check) takes check_model's result, got {type(check).__name__}")
    return replace(graph, checks=check.verdicts)


def check_finding(source: Verdicts) -> str:
    """One line: the culprit's headline, else the first gradient cut's, else the counts per status.

    >>> check_finding([Verdict("fc", UnitKind.MODULE, "Linear", "Linear.forward", None, Status.PASSED)])
    'model check: 1 passed'
    """
    verdicts = verdicts_of(source)
    named = [v for v in verdicts if v.culprit and v.status == Status.FAILED]
    named += [v for v in verdicts if v.status == Status.DETACHED and v.explained_by is None]
    if named:
        return named[0].headline()
    counts = {s: sum(1 for v in verdicts if v.status == s) for s in Status.ALL}
    return "model check: " + (", ".join(f"{n} {s}" for s, n in counts.items() if n) or "no verdicts")


def check_code(verdict: Verdict) -> int:
    """0 passed, 1 not checked or not checkable, 2 detached, 3 failed because of a culprit inside, 4 the culprit.

    >>> check_code(Verdict("a", UnitKind.MODULE, "Linear", "Linear.forward", None, Status.PASSED))
    0
    """
    if verdict.status == Status.PASSED:
        return CHECK_CODES["passed"]
    if verdict.status == Status.DETACHED:
        return CHECK_CODES["detached"]
    if verdict.status != Status.FAILED:
        return CHECK_CODES["unchecked"]
    return CHECK_CODES["culprit"] if verdict.culprit else CHECK_CODES["explained"]


def module_verdicts(source: Verdicts) -> dict[str, Verdict]:
    """Per module path, the verdict that speaks for the module: the worst of its calls and what it made.

    A culprit Function, hook or `.detach()` marks the module it lives in.
    """
    found: dict[str, Verdict] = {}
    for v in verdicts_of(source):
        held = found.get(v.path)
        rank = (check_code(v), v.kind == UnitKind.MODULE)
        if held is None or rank > (check_code(held), held.kind == UnitKind.MODULE):
            found[v.path] = v
    return found


def node_verdicts(graph: Graph, source: Verdicts | None = None) -> dict[str, Verdict]:
    """Node id -> the verdict of the unit that made the node (`source`: the graph's own `checks` when None).

    An op made by a custom Function (`FusedAttentionBackward`) takes that Function's verdict;
    any other op and its saved tensors take their module's (`Node.module`): the verdict of a
    hook or `.detach()` found in the module's own code, else the worst of the module's calls.
    Nodes of no module, and leaves and outputs, are left out.
    """
    verdicts = verdicts_of(graph if source is None else source)
    functions = {(v.path, v.type_name + "Backward"): v for v in verdicts if v.kind == UnitKind.FUNCTION}
    own: dict[str, Verdict] = {}
    for v in verdicts:
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
    return v.kind != UnitKind.MODULE and (v.culprit or v.status == Status.DETACHED), check_code(v)
