"""The payloads the viewer's JavaScript unit tests read (graphviz_app/viewer/test/fixtures), made by payload().

Run `python tests/support/js_fixtures.py` from the repository root to write them again after the payload
changes; `tests/viewer/test_viewer_js.py` fails while they differ from what `payload()` makes now.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
if str(_HERE) not in sys.path:
    sys.path.insert(0, str(_HERE))

from viewer_support import chain_graph, checked_graph, compare_pair, module_graph, with_order  # noqa: E402

from graphviz_app.viewer.compare import compare_payload  # noqa: E402
from graphviz_app.viewer.packing import pack  # noqa: E402
from graphviz_app.viewer.payload import payload  # noqa: E402

__all__ = ["FIXTURES", "fixtures", "text", "main"]

FIXTURES = _HERE.parents[1] / "graphviz_app" / "viewer" / "test" / "fixtures"


def fixtures() -> dict[str, dict[str, Any]]:
    """File name -> payload: modules and rolled blocks, hostile names, a long flat chain, a checked model;
    and a compare file's data (three blocks against two in bfloat16); the modules and the chain again with
    every column packed, as `encode` packs a long graph's."""
    return {
        "modules_packed.json": pack(payload(with_order(module_graph(3)), title="three blocks"), pack_from=1),
        "chain_packed.json": pack(payload(chain_graph(400), title="chain"), pack_from=1),
        "modules.json": payload(with_order(module_graph(3)), title="three blocks"),
        "hostile.json": payload(module_graph(2, hostile=True), title="<b>hostile</b>"),
        "chain.json": payload(chain_graph(400), title="chain"),
        "checked.json": payload(checked_graph(), title="checked"),
        "compare.json": compare_payload(*compare_pair(), labels=("fp32", "bf16")),
    }


def text(data: dict[str, Any]) -> str:
    """The fixture file's text: stable key order, one payload per file."""
    return json.dumps(data, sort_keys=True, indent=None, separators=(",", ":")) + "\n"


def main() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for name, data in fixtures().items():
        (FIXTURES / name).write_text(text(data), encoding="utf-8")
        print(f"wrote {FIXTURES / name}")


if __name__ == "__main__":
    main()
