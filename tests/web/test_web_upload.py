"""Open a saved graph on the page (AppTest): good files show in the viewer, hostile ones get a message."""

from __future__ import annotations

import json

import pytest
from viewer_support import HOSTILE, chain_graph, module_graph  # noqa: E402
from web_support import box_labels, new_app, page_text, shown, shown_names, shown_payload

from graphviz_app.errors import SchemaError
from graphviz_app.model import to_compact
from graphviz_app.web import service
from graphviz_app.web.results import Analysis, Failure
from graphviz_app.web.upload import MAX_UPLOAD_BYTES, read_saved_graph

OTHER = "y = torch.ones(2, requires_grad=True)\n(y * 5).sum()"


def upload(at, name: str, data: bytes):  # noqa: ANN001, ANN201
    at.file_uploader(key="upload").set_value((name, data, "application/json")).run()
    assert not at.exception
    return at


def schema_1(graph) -> bytes:  # noqa: ANN001
    data = json.loads(graph.to_json())
    data["schema"] = 1  # what schema 2 writes for a graph without modules, sources or gradients
    return json.dumps(data).encode()


@pytest.fixture(scope="module")
def page():  # noqa: ANN201
    return new_app()


def nonfinite_statistics() -> bytes:
    """A saved graph whose head's gradient norm is NaN (schema 2 writes it as a bare NaN)."""
    from dataclasses import replace

    from graphviz_app.model import GradInfo

    graph = module_graph(3)
    grad = GradInfo(numel=8, norm=float("nan"), max_abs=float("inf"), mean_abs=0.0, nan=8)
    nodes = tuple(replace(n, grad=grad) if n.id == "n1" else n for n in graph.nodes)
    return replace(graph, nodes=nodes).to_json().encode()


@pytest.mark.parametrize(("name", "data"), [
    ("model.json", module_graph(3).to_json().encode()),
    ("compact.json", json.dumps(to_compact(module_graph(3))).encode()),
    ("old.json", schema_1(chain_graph(12))),
    ("nan.json", nonfinite_statistics()),
])
def test_a_saved_graph_of_each_schema_shows_in_the_viewer_with_its_summary(page, name: str, data: bytes) -> None:  # noqa: ANN001
    at = upload(page, name, data)
    assert not at.error, shown(at, "error")
    assert shown_payload(at)["title"] == name
    assert "SumBackward0" in shown_names(at) or "MulBackward0" in shown_names(at)
    assert any(c.startswith(f"{name} (saved graph): ") and " nodes, " in c for c in shown(at, "caption"))
    assert any("press Run to see this program's graph" in c for c in shown(at, "caption"))
    assert "w_check_expected" not in [w.key for w in at.text_input]  # no check panel for a file


def test_a_saved_model_graph_has_its_module_table_and_rolled_boxes() -> None:
    at = upload(new_app(), "model.json", module_graph(3).to_json().encode())
    tables = [t.value for t in at.table if "param bytes" in t.value.columns]
    modules = {r["module"]: r for t in tables for _, r in t.iterrows()}
    assert modules["blocks.0.fc"]["type"] == "Linear" and modules["head"]["type"] == "Head"
    assert "blocks.0–2: Block ×3" in box_labels(at)
    # The link holds the program, never the file (it stays on this page).
    assert "view" not in at.query_params
    assert any("a link holds the program, not the file" in c for c in shown(at, "caption"))


def test_hostile_names_in_a_saved_graph_are_data() -> None:
    at = upload(new_app(), "hostile.json", module_graph(4, hostile=True).to_json().encode())
    assert not at.error
    names = shown_names(at)
    assert {HOSTILE[0], HOSTILE[1]} <= names  # carried as text for the viewer's textContent
    assert HOSTILE[0] in shown(at, "info")  # the file's note reads as typed...
    raw = next(str(e.value) for e in at.info if "pwned" in str(e.value))
    assert "\\<" in raw and "<script>" not in raw  # ...because its markup is escaped, never rendered


HOSTILE_FILES = [
    ("broken.json", b'{"schema": 2, "nodes": [', "broken.json is not JSON (Expecting value: line 1 column 25"),
    ("other.json", b'{"schema": 7}', 'is not a graph this page reads: expected a graph with "schema": 1, 2 or 3'),
    ("list.json", b"[1, 2, 3]", "is not a graph this page reads: expected a graph"),
    ("fields.json", b'{"schema": 2, "nodes": [1, 2], "edges": []}', "nodes[0] holds the wrong kind of value"),
    ("deep.json", b"[" * 100_000 + b"]" * 100_000, "nests its JSON deeper than the reader goes"),
    ("binary.json", b"\x89PNG\r\n\x1a\n\x00\x00", "binary.json is not UTF-8 text"),
    ("number.json", b'{"schema": ' + b"9" * 5000 + b"}", "holds a number of more than 4,300 digits"),
    ("empty.json", b"", "empty.json is not JSON"),
]


@pytest.mark.parametrize(("name", "data", "words"), HOSTILE_FILES, ids=[h[0] for h in HOSTILE_FILES])
def test_a_hostile_file_gets_a_clear_message(page, name: str, data: bytes, words: str) -> None:  # noqa: ANN001
    at = upload(page, name, data)
    errors = shown(at, "error")
    assert len(errors) == 1 and "Could not open the saved graph" in errors[0], errors
    assert words in errors[0]
    assert "Traceback" not in page_text(at) and "This is a bug" not in errors[0]


def test_a_file_over_the_size_limit_is_refused_before_it_is_read() -> None:
    at = upload(new_app(), "huge.json", b" " * (MAX_UPLOAD_BYTES + 1))
    errors = shown(at, "error")
    assert len(errors) == 1
    assert "huge.json is 25.0 MB; the page opens saved graphs of at most 25 MB" in errors[0]
    assert "graphviz-app render huge.json -o graph.html" in errors[0]


def test_after_a_refused_file_run_shows_the_program_again(page) -> None:  # noqa: ANN001
    at = upload(page, "broken.json", b"{")
    assert shown(at, "error")
    at.session_state[f"editor-{at.session_state['editor_rev']}"] = {"value": OTHER}
    at.button(key="run").click().run()
    assert not at.exception and not at.error
    assert "MulBackward0" in shown_names(at)
    assert shown_payload(at)["title"] == "program"


# The reader and the service, without the page ------------------------------------------
def test_the_reader_refuses_a_file_over_the_limit_without_parsing_it() -> None:
    with pytest.raises(SchemaError, match=r"g.json is 25.0 MB; the page opens saved graphs of at most 25 MB"):
        read_saved_graph(b"[" * (MAX_UPLOAD_BYTES + 1), "g.json")


@pytest.mark.parametrize(("kind", "words"), [
    ("overtime", "took longer than the 15 s a job may run, with the machine to itself"),
    ("time", "while other jobs ran: it may pass at a quieter moment"),
    ("memory", "needed more than the 2 GiB a job may use"),
    ("crash", "stopped (most often: out of memory)"),
])
def test_a_file_that_takes_the_worker_past_a_limit_is_called_too_big_not_a_program(kind: str, words: str) -> None:
    from graphviz_app.expr import ExprError

    class Runner:  # the worker pool, as it answers a job past a limit
        time_limit = 15.0

        def run(self, job, *args):  # noqa: ANN001, ANN002, ANN202
            raise ExprError("the program ran past its limit", kind=kind)

    found = service.open_saved(Runner(), b"{}", "big.json", service.Options())
    assert isinstance(found, Failure) and found.kind == kind
    assert found.message.startswith("reading big.json " if kind != "crash" else "the worker reading big.json")
    assert words in found.message and "graphviz-app render big.json -o graph.html" in found.message
    assert "program" not in found.message


def test_the_worker_job_reads_a_saved_graph_into_what_the_page_shows() -> None:
    from graphviz_app.jobs.saved import saved_graph_job
    from graphviz_app.web.urlstate import Options

    data = json.dumps(to_compact(module_graph(3))).encode()
    found = saved_graph_job(data, "model.json", Options(roll=False))
    assert isinstance(found, Analysis) and found.source == "model.json"
    assert found.graph_json == data.decode()  # the downloads are made from the file itself
    assert found.node_count == 15 and found.outputs == () and found.leaves == ()
    assert found.summary.startswith("15 nodes, 14 edges")
    assert {r[0]: r[1] for r in found.modules}["blocks.0.fc"] == "Linear"


def test_a_saved_graph_opened_at_a_depth_that_closes_no_box_says_so() -> None:
    from graphviz_app.jobs.saved import saved_graph_job
    from graphviz_app.web.urlstate import Options

    graph = module_graph(3)
    deepest = max((n.module or "").count(".") + 1 for n in graph.nodes if n.module)
    found = saved_graph_job(graph.to_json().encode(), "model.json", Options(module_depth=deepest + 1))
    assert isinstance(found, Analysis), found
    assert [n for n in found.notes if n.startswith(f"Module depth {deepest + 1} closes no module")], found.notes
    shallow = saved_graph_job(graph.to_json().encode(), "model.json", Options(module_depth=deepest))
    assert isinstance(shallow, Analysis) and not [n for n in shallow.notes if n.startswith("Module depth")]

