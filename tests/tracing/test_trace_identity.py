"""trace() makes byte-identical JSON for every graph of the corpus, under every option set.

`golden/trace_digests.json` holds the SHA-256 of `trace(...).to_json()` for
each case and option set, written by the tracer before it was optimised. A
speed change must leave every digest as it is; a change that means to alter
the output rewrites them with GRAPHVIZ_APP_UPDATE_GOLDEN=1.

Floating-point values computed by torch differ in the last bits between CPUs
(vector kernels), so the digest covers each tensor's values only by count and
type; `test_core_oracle` compares the values themselves with torch's.
"""

from __future__ import annotations

import hashlib
import json
import os

import pytest
from core_golden import GOLDEN_DIR, UPDATE_ENV
from core_trace_cases import IDENTITY_CASES, OPTION_SETS

from graphviz_app import trace

DIGESTS = GOLDEN_DIR / "trace_digests.json"


def _without_float_values(text: str) -> str:
    """The JSON with each float among a tensor's values replaced by "float": the rest stays byte for byte."""
    data = json.loads(text)
    for node in data["nodes"]:
        tensor = node["tensor"]
        if tensor is not None and tensor["values"] is not None:
            tensor["values"] = ["float" if type(v) is float else v for v in tensor["values"]]
    return json.dumps(data)


def _digests(case_name: str) -> dict[str, str]:
    case = IDENTITY_CASES[case_name]()
    return {
        opt_name: hashlib.sha256(
            _without_float_values(trace(case.outputs, case.params, **opts).to_json()).encode()
        ).hexdigest()
        for opt_name, opts in OPTION_SETS.items()
    }


def _stored() -> dict[str, dict[str, str]]:
    return json.loads(DIGESTS.read_text(encoding="utf-8")) if DIGESTS.exists() else {}


@pytest.mark.parametrize("case_name", sorted(IDENTITY_CASES))
def test_trace_json_is_byte_identical_to_the_recorded_digest(case_name: str) -> None:
    found = _digests(case_name)
    stored = _stored()
    if os.environ.get(UPDATE_ENV) == "1" and stored.get(case_name) != found:
        stored[case_name] = found
        DIGESTS.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        pytest.fail(f"rewrote {case_name} in {DIGESTS}: review the diff, then rerun without {UPDATE_ENV}=1")
    assert case_name in stored, f"no digest for {case_name} in {DIGESTS}: write it with {UPDATE_ENV}=1"
    changed = sorted(opt for opt in found if stored[case_name].get(opt) != found[opt])
    assert not changed, (
        f"trace() JSON of {case_name!r} changed under option set(s) {changed} "
        f"({', '.join(f'{o}={OPTION_SETS[o]}' for o in changed)}); a speed-up must keep it "
        f"byte-identical; if the change is intended, rerun with {UPDATE_ENV}=1"
    )


def test_every_case_has_a_digest_and_no_digest_is_stale() -> None:
    assert sorted(_stored()) == sorted(IDENTITY_CASES)


def test_the_walker_hands_back_each_node_ids_autograd_node() -> None:
    # A step after the walk (the gradient replay) finds each op by node id.
    from core_corpus import mlp

    from graphviz_app.model import NodeKind
    from graphviz_app.tracing.tracer import _param_names
    from graphviz_app.tracing.walker import Walker, WalkOptions

    case = mlp()
    with Walker(WalkOptions(_param_names(case.params)), []) as walker:
        graph = walker.walk([("output", case.outputs)])
        fns = walker.fn_by_node_id()
    drawn = {n.id: n for n in graph.nodes if n.kind in (NodeKind.OP, NodeKind.LEAF)}
    assert sorted(fns) == sorted(drawn)
    for node_id, node in drawn.items():
        if node.kind is NodeKind.OP:
            assert type(fns[node_id]).__name__ == node.name
        else:
            assert fns[node_id].variable is case.params[node.name]
    assert walker.fn_by_node_id() == {}  # released on leaving the block
