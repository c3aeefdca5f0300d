"""A graph's one-line summary: counts, devices, and the memory it holds per device."""

from __future__ import annotations

from collections import Counter

from ..model import PACKED_BY_HOOK, STATE_ATTR, Graph, Summary
from ..model.checks import Status
from .model_check_nodes import check_finding
from .module_tree import held_bytes

__all__ = ["summarize"]


def summarize(graph: Graph, *, saved_traced: bool | None = None) -> Summary:
    """`graph.summary()`: counts per kind, devices, dtypes, and memory per device."""
    devices: set[str] = set()
    dtypes: set[str] = set()
    for n in graph.nodes:
        t = n.tensor
        if t is None or t.freed:  # a freed tensor's device and dtype are "unknown"
            continue
        devices.add(t.device)
        dtypes.add(t.dtype)
    activations, params, freed = _memory(graph)
    node_kinds = Counter(n.kind.value for n in graph.nodes)
    if saved_traced is None and (activations or node_kinds["saved"]):
        saved_traced = True  # saved tensors were traced: these may be parameters or freed
    edge_kinds = Counter(e.kind.value for e in graph.edges)
    checks, finding = _checks(graph)
    return Summary(
        nodes=len(graph.nodes),
        edges=len(graph.edges),
        nodes_by_kind=tuple(sorted(node_kinds.items())),
        edges_by_kind=tuple(sorted(edge_kinds.items())),
        devices=tuple(sorted(devices)),
        dtypes=tuple(sorted(dtypes)),
        activation_bytes=activations,
        param_bytes=params,
        saved_traced=saved_traced,
        freed_saved=freed,
        checks=checks,
        check_finding=finding,
    )


def _checks(graph: Graph) -> tuple[tuple[tuple[str, int], ...], str | None]:
    """A model check's verdicts the graph carries: counts per status and the culprit's headline."""
    if not graph.checks:
        return (), None
    counts = Counter(v.status for v in graph.checks)
    finding = check_finding(graph.checks)
    named = not finding.startswith("model check: ")  # a culprit's or a cut's line, not the counts again
    return tuple((s, counts[s]) for s in Status.ALL if counts[s]), finding if named else None


def _memory(graph: Graph) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...], int]:
    """(activation bytes per device, leaf bytes per device, freed saved count)."""
    # storage key -> (device, bytes); a storage counts once and whole: a view keeps all of it alive.
    leaves: dict[str, tuple[str, int]] = {}
    saved: dict[str, tuple[str, int]] = {}
    freed = 0
    for n in graph.nodes:
        t = n.tensor
        if t is None or n.kind.value not in ("leaf", "saved"):
            continue
        if t.freed:
            # packed by a saved-tensor hook (checkpointing recomputes it in backward): not freed by a backward
            freed += (STATE_ATTR, PACKED_BY_HOOK) not in n.attrs
            continue
        into = leaves if n.kind.value == "leaf" else saved
        key = t.storage or n.id
        into[key] = (t.device, max(into.get(key, ("", 0))[1], held_bytes(t)))
    # A saved parameter (Linear saves its weight) is no activation memory.
    held = {k: v for k, v in saved.items() if k not in leaves}
    return _by_device(held), _by_device(leaves), freed


def _by_device(storages: dict[str, tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    totals: Counter[str] = Counter()
    for device, size in storages.values():
        totals[device] += size
    return tuple(sorted(totals.items()))

