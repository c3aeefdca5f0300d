"""The page's jobs, run in-process: the numbers and words a person reads on the page."""

from __future__ import annotations

import pytest
from web_support import decode_viewer

from graphviz_app.jobs.page import analysis_job, check_job
from graphviz_app.jobs.pictures import png_job, svg_job
from graphviz_app.model import Graph
from graphviz_app.web import present, service
from graphviz_app.web.gallery import EXAMPLES, example
from graphviz_app.web.results import Analysis, Failure, GradientCheck
from graphviz_app.web.urlstate import SEED_PROGRAM, Options

TOL = (1e-6, 1e-5, 1e-3)


# The gallery examples that take about 5 s or more to run and draw on a busy machine.
SLOW_EXAMPLES = {"cnn": pytest.mark.slow, "transformer": pytest.mark.slow}


def test_the_seed_program_gives_the_hand_derived_gradient() -> None:
    result = analysis_job(SEED_PROGRAM, Options())
    assert isinstance(result, Analysis)
    assert [(g.name, g.text) for g in result.grads] == [("x.grad", "[1.3333, 2.0000, 2.6667]")]
    assert result.outputs[0].text == "12.6667"
    assert "MeanBackward0" in decode_viewer(result.viewer)["graph"]["strings"]  # what the browser draws
    svg = svg_job(result.graph_json, "TB")  # the SVG download, laid out when asked for
    assert isinstance(svg, bytes) and svg.lstrip().startswith(b"<?xml") and b"MeanBackward0" in svg
    assert "MeanBackward0" in service.dot(result.graph_json, "TB")
    assert result.summary.startswith("7 nodes, 6 edges")
    assert Graph.from_json(result.graph_json).summary().nodes == result.node_count == 7
    assert result.leaves == ("x",)


def test_options_reach_the_drawing() -> None:
    lean = analysis_job(SEED_PROGRAM, Options(show_saved=False, show_attrs=False, rankdir="LR"))
    full = analysis_job(SEED_PROGRAM, Options())
    assert isinstance(lean, Analysis) and isinstance(full, Analysis)
    lean_dot, full_dot = service.dot(lean.graph_json, "LR"), service.dot(full.graph_json, "TB")
    assert "rankdir=LR" in lean_dot
    assert lean.node_count < full.node_count  # no saved-tensor node
    assert "exponent" in full_dot and "exponent" not in lean_dot


def test_dtype_and_device_options_are_the_constructors_defaults() -> None:
    result = analysis_job(SEED_PROGRAM, Options(dtype="float64"))
    assert isinstance(result, Analysis)
    assert result.grads[0].dtype == "float64" and result.grads[0].device == "cpu"


@pytest.mark.parametrize("ex", [pytest.param(e, id=e.key, marks=SLOW_EXAMPLES.get(e.key, ())) for e in EXAMPLES])
def test_every_gallery_example_draws_a_graph(ex) -> None:  # noqa: ANN001
    result = analysis_job(ex.program, Options())
    assert isinstance(result, Analysis), str(result)
    data = decode_viewer(result.viewer)
    assert len(data["graph"]["nodes"]["kind"]) == result.node_count > 2
    assert ex.wrt in result.leaves


def test_the_accumulated_loss_graph_grows_with_each_step() -> None:
    program = example("accumulate").program
    nodes = [analysis_job(program.replace("range(4)", f"range({n})"), Options()).node_count for n in (2, 4, 8)]
    assert nodes[0] < nodes[1] < nodes[2]


@pytest.mark.parametrize(
    ("program", "kind", "words"),
    [
        ("().__class__.__bases__", "refused", "attribute names starting with _ are not allowed"),
        ("torch.randn(int(3e10))", "limit", "30,000,000,000"),
        ("x = (", "syntax", "syntax error"),
        ("x = torch.ones(3)\n(x * 2).sum()", "trace", "requires_grad=True"),
        ("y * 2", "name", "y"),
    ],
)
def test_a_bad_program_gives_a_failure_a_person_can_act_on(program: str, kind: str, words: str) -> None:
    result = analysis_job(program, Options())
    assert isinstance(result, Failure)
    assert result.kind == kind
    assert words in str(result)


def test_a_non_scalar_output_is_differentiated_as_its_sum_with_a_note() -> None:
    result = analysis_job("x = torch.arange(3., requires_grad=True)\nx * 2", Options())
    assert isinstance(result, Analysis)
    assert result.grads[0].text == "[2.0000, 2.0000, 2.0000]"
    assert any("gradient of ones" in note for note in result.notes)


def test_a_leaf_the_output_ignores_has_no_gradient() -> None:
    program = "x = torch.ones(2, requires_grad=True)\nunused = torch.ones(2, requires_grad=True)\n(x * 3).sum()"
    result = analysis_job(program, Options())
    assert isinstance(result, Analysis)
    grads = {g.name: g.text for g in result.grads}
    assert grads["x.grad"] == "[3.0000, 3.0000]"
    assert grads["unused.grad"].startswith("None")


TYPED_CNN = """torch.manual_seed(0)
net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
head = nn.Linear(4, 2)
x = torch.randn(1, 3, 6, 6)
head(net(x).mean((2, 3))).sum()"""


def test_module_parameters_have_their_gradients_listed_by_name() -> None:
    result = analysis_job(TYPED_CNN, Options())
    assert isinstance(result, Analysis), str(result)
    grads = {g.name: g for g in result.grads}
    assert list(grads) == ["net.0.weight.grad", "net.0.bias.grad", "head.weight.grad", "head.bias.grad"]
    assert grads["net.0.weight.grad"].shape == "(4, 3, 3, 3)"
    assert grads["head.bias.grad"].text == "[1.0000, 1.0000]"  # d(sum)/d(bias) is one per output
    assert result.leaves == ()  # the checker takes named tensors only


def test_png_download_is_a_png_of_the_same_graph() -> None:
    result = analysis_job(SEED_PROGRAM, Options())
    assert isinstance(result, Analysis)
    data = png_job(result.graph_json, "TB")
    assert isinstance(data, bytes) and data.startswith(b"\x89PNG\r\n\x1a\n")


def test_the_right_hand_gradient_passes() -> None:
    check = check_job(SEED_PROGRAM, Options(), "x", "2*(x+2)/3", TOL)
    assert isinstance(check, GradientCheck) and check.passed
    verdict = present.verdict(check)
    assert verdict.passed and "2*(x+2)/3 is right" in verdict.headline


def test_a_hand_gradient_off_by_a_factor_fails_and_names_the_factor() -> None:
    check = check_job(SEED_PROGRAM, Options(), "x", "2*(x+2)", TOL)
    assert isinstance(check, GradientCheck) and not check.passed
    verdict = present.verdict(check)
    assert not verdict.passed
    assert verdict.headline == "Your gradient d(output)/dx = 2*(x+2) is wrong: it is 3 × autograd's"
    assert "3 of 3 elements fail" in verdict.detail
    table = present.element_table(present.pairs_of(check)[0], wrt="x", has_expected=True)
    assert table is not None
    assert list(table.columns) == ["element", "autograd", "finite differences", "yours", "error", "failed"]
    assert table["element"].tolist() == ["x[0]", "x[1]", "x[2]"]
    assert table["failed"].all()
    assert table["autograd"].round(4).tolist() == [1.3333, 2.0, 2.6667]
    assert table["yours"].tolist() == [4.0, 6.0, 8.0]


def test_a_wrong_custom_backward_is_blamed_not_the_person() -> None:
    ex = example("custom")
    check = check_job(ex.program, Options(), ex.wrt, ex.hint, TOL)
    assert isinstance(check, GradientCheck) and not check.passed
    verdict = present.verdict(check)
    assert verdict.headline.startswith("The backward is wrong")
    assert "autograd is 1/2 × finite differences" in verdict.headline


@pytest.mark.parametrize("ex", EXAMPLES, ids=[e.key for e in EXAMPLES])
def test_every_gallery_hint_is_a_checkable_gradient(ex) -> None:  # noqa: ANN001
    check = check_job(ex.program, Options(), ex.wrt, ex.hint, TOL)
    assert isinstance(check, GradientCheck), str(check)
    assert check.passed is (ex.key not in ("custom", "nan"))  # autograd is wrong (custom) or NaN at 0


def test_a_matrix_jacobian_gets_a_heatmap_and_a_vector_does_not() -> None:
    ex = example("softmax")
    wrong = ex.hint.replace("/ 3", "/ 2")
    matrix = check_job(ex.program, Options(), ex.wrt, wrong, TOL)
    assert isinstance(matrix, GradientCheck) and not matrix.passed
    grid = present.error_grid(present.pairs_of(matrix)[0], wrt="logits")
    assert grid is not None and (grid["row"].max(), grid["col"].max()) == (2, 4)
    assert grid.attrs == {"rows": "row of logits", "cols": "column of logits"}
    assert grid["failed"].any()
    vector = check_job(SEED_PROGRAM, Options(), "x", "2*(x+2)", TOL)
    assert present.error_grid(present.pairs_of(vector)[0], wrt="x") is None


@pytest.mark.parametrize(
    ("wrt", "expected", "words"),
    [
        ("x", "2*(y+2)", "y"),
        ("x", "2*(x+2", "syntax error"),
        ("nope", "2*x", "nope is not a variable of the program"),
        ("x", "torch.ones(4)", "shape"),
    ],
)
def test_a_bad_hand_gradient_says_what_is_wrong(wrt: str, expected: str, words: str) -> None:
    result = check_job(SEED_PROGRAM, Options(), wrt, expected, TOL)
    assert isinstance(result, Failure)
    assert words in str(result)


@pytest.mark.cuda
def test_on_a_gpu_the_device_list_and_the_moved_tensor_show_both_devices() -> None:
    from graphviz_app.jobs.page import devices_job

    assert "cuda:0" in devices_job()
    result = analysis_job(example("devices").program, Options(device="cuda:0"))
    assert isinstance(result, Analysis), str(result)
    assert result.summary.endswith("devices: cpu, cuda:0")
    devices = {g.name: g.device for g in result.grads}
    assert devices == {"w.grad": "cuda:0", "x.grad": "cpu"}
    copy = next(line for line in service.dot(result.graph_json, "TB").splitlines() if "ToCopyBackward0" in line)
    assert "#e03131" in copy  # the op crossing devices is drawn in red
    check = check_job(example("devices").program, Options(device="cuda:0"), "w", "x_moved", TOL)
    assert isinstance(check, GradientCheck) and check.passed


GRU_PROGRAM = "torch.manual_seed(0)\nm = nn.GRU(4, 8)\nx = torch.randn(5, 2, 4)\nm(x)[0].sum()"


@pytest.mark.parametrize(("depth", "said"), [
    (0, False),  # the viewer picks the level
    (1, False),  # m is a closed box
    (2, True),
    (5, True),
])
def test_a_module_depth_that_closes_no_box_says_so_and_names_the_depth_that_would(depth: int, said: bool) -> None:
    result = analysis_job(GRU_PROGRAM, Options(module_depth=depth))
    assert isinstance(result, Analysis), str(result)
    notes = [n for n in result.notes if n.startswith("Module depth")]
    expected = (f"Module depth {depth} closes no module: the deepest module with ops is at depth 1 ('m'), so every "
                "module is drawn open; Module depth 1 shows the modules at depth 1 as closed boxes (click one to "
                "open it)")
    assert notes == ([expected] if said else [])
