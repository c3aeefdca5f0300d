"""A graph's one-line summary: counts, devices, and the memory it holds per device."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # model imports this module; the Graph is only a type here
    from .model import Graph

__all__ = ["Summary", "summarize", "human_bytes"]


@dataclass(frozen=True, slots=True)
class Summary:
    """Counts and memory of a graph, for one-line display.

    `activation_bytes` is the memory the graph itself keeps alive: saved
    tensors that are not leaf tensors (not parameters, not inputs with
    requires_grad), counted once per storage, per device. `param_bytes` is
    the memory of the leaf tensors the graph refers to (mostly parameters,
    which exist anyway), per device. `saved_traced` is False when the graph
    was traced with `show_saved=False` (activation memory unknown), None when
    the graph holds no saved tensor node and the caller did not say whether
    saved tensors were traced. `freed_saved` counts saved tensors already released.
    """

    nodes: int
    edges: int
    nodes_by_kind: tuple[tuple[str, int], ...]
    edges_by_kind: tuple[tuple[str, int], ...]
    devices: tuple[str, ...]
    dtypes: tuple[str, ...]
    activation_bytes: tuple[tuple[str, int], ...] = ()
    param_bytes: tuple[tuple[str, int], ...] = ()
    saved_traced: bool | None = True
    freed_saved: int = 0

    @property
    def activations_total(self) -> int:
        """Bytes held by the graph's saved activations, all devices together."""
        return sum(b for _, b in self.activation_bytes)

    @property
    def params_total(self) -> int:
        """Bytes of the leaf tensors (parameters) the graph refers to, all devices together."""
        return sum(b for _, b in self.param_bytes)

    def __str__(self) -> str:
        devices = ", ".join(self.devices) or "none"
        if self.saved_traced is False:
            held = "not traced (show_saved=False)"
        elif self.saved_traced is None and not self.activation_bytes:
            held = "unknown (no saved tensor traced)"
        else:
            held = _per_device(self.activation_bytes)
        if self.freed_saved:
            held += f" ({self.freed_saved} freed by backward)"
        return (
            f"{self.nodes} nodes, {self.edges} edges, activations held {held}, "
            f"parameters referenced {_per_device(self.param_bytes)}, devices: {devices}"
        )


def _per_device(by_device: tuple[tuple[str, int], ...]) -> str:
    if len(by_device) <= 1:
        return human_bytes(by_device[0][1] if by_device else 0)
    return " + ".join(f"{human_bytes(b)} on {d}" for d, b in by_device)


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
    )


def _memory(graph: Graph) -> tuple[tuple[tuple[str, int], ...], tuple[tuple[str, int], ...], int]:
    """(activation bytes per device, leaf bytes per device, freed saved count)."""
    # storage key -> (device, bytes); a storage counts once, at its largest view.
    leaves: dict[str, tuple[str, int]] = {}
    saved: dict[str, tuple[str, int]] = {}
    freed = 0
    for n in graph.nodes:
        t = n.tensor
        if t is None or n.kind.value not in ("leaf", "saved"):
            continue
        if t.freed:
            freed += 1
            continue
        into = leaves if n.kind.value == "leaf" else saved
        key = t.storage or n.id
        into[key] = (t.device, max(into.get(key, ("", 0))[1], t.bytes))
    # A saved parameter (Linear saves its weight) is no activation memory.
    held = {k: v for k, v in saved.items() if k not in leaves}
    return _by_device(held), _by_device(leaves), freed


def _by_device(storages: dict[str, tuple[str, int]]) -> tuple[tuple[str, int], ...]:
    totals: Counter[str] = Counter()
    for device, size in storages.values():
        totals[device] += size
    return tuple(sorted(totals.items()))


def human_bytes(n: int) -> str:
    """Bytes as people read them.

    >>> human_bytes(12), human_bytes(2048), human_bytes(3 * 1024**3)
    ('12 B', '2.0 KiB', '3.0 GiB')
    """
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")
