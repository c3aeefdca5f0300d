"""The page's program and options as URL query parameters, both ways; no Streamlit."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from urllib.parse import urlencode

from ..model.numbers import NumberError, whole_number

__all__ = [
    "DTYPES",
    "RANKDIRS",
    "MAX_NODES_RANGE",
    "MODULE_DEPTH_RANGE",
    "MAX_URL_PROGRAM_CHARS",
    "MAX_VIEW_CHARS",
    "SEED_PROGRAM",
    "Options",
    "CheckInput",
    "PageState",
    "from_query",
    "to_query",
    "share_query",
    "with_options",
]

DTYPES = ("float32", "float64", "float16", "bfloat16")
RANKDIRS = ("TB", "LR", "BT", "RL")
MAX_NODES_RANGE = (10, 20_000)  # nodes traced; the viewer shows any number of them
MODULE_DEPTH_RANGE = (0, 20)  # 0: the viewer picks the level; N: modules deeper than N open as closed boxes
# The page is fetched with the query in the request line; HTTP servers refuse
# request lines past about 16 KiB, and URL-encoding can triple a program.
MAX_URL_PROGRAM_CHARS = 4000
# The viewer's fragment (open boxes, shown instances, selection, colouring): a few hundred
# characters for a person's clicks; a longer one is not from the page.
MAX_VIEW_CHARS = 4000

SEED_PROGRAM = "x = torch.arange(3., requires_grad=True)\n((x+2)**2+3).mean()\n"

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
# A lone surrogate is not text: a URL cannot carry it (urlencode raises), so a
# link shows it as U+FFFD, as browsers do.
_SURROGATE = re.compile("[\ud800-\udfff]")
_DEVICE = re.compile(r"(cpu|cuda)(:[0-9]{1,10})?")  # ASCII digits: \d also matches "٣"


@dataclass(frozen=True, slots=True)
class Options:
    """How to evaluate and draw a program: the sidebar's settings."""

    device: str = "cpu"
    dtype: str = "float32"
    show_saved: bool = True
    show_attrs: bool = True
    rankdir: str = "TB"
    max_nodes: int = 1000
    show_gradients: bool = True
    module_depth: int = 0
    roll: bool = True


@dataclass(frozen=True, slots=True)
class CheckInput:
    """A hand-derived gradient to check: `expected` is d(output)/d(`wrt`)."""

    wrt: str = ""
    expected: str = ""


@dataclass(frozen=True, slots=True)
class PageState:
    """Everything a link carries: the program, the options, the gradient to check, the viewer's view, and a
    second program shown beside the first in synced panes (`compare`, empty for none).

    `view` is the viewer's fragment (`open=0.3.7&inst=7:2&sel=n42&color=gradient`: boxes by
    their numbers in the viewer's data); `expanded` module boxes opened by name (`?expand=`,
    for links written by hand), applied when there is no `view`. `compare_view` is the synced panes'
    view (their first pane's fragment, which the second pane follows), kept with the second program.
    """

    program: str = SEED_PROGRAM
    options: Options = field(default_factory=Options)
    check: CheckInput = field(default_factory=CheckInput)
    expanded: tuple[str, ...] = ()  # module boxes opened in the graph (sorted)
    view: str = ""
    compare: str = ""
    compare_view: str = ""


def from_query(params: Mapping[str, str | list[str]]) -> tuple[PageState, list[str]]:
    """Read a page state from query parameters; missing ones take defaults.

    Args:
        params: the URL's query, as `st.query_params` or `parse_qs` give it.

    Returns:
        The state, and one sentence per parameter that was ignored and why.

    >>> state, problems = from_query({"program": "y = 1", "dtype": "float8"})
    >>> state.program, state.options.dtype
    ('y = 1', 'float32')
    >>> problems
    ['ignored ?dtype=float8: expected one of float32, float64, float16, bfloat16']
    """
    problems: list[str] = []
    get = _Reader(params, problems)
    default = Options()
    options = Options(
        device=get.device("device", default.device),
        dtype=get.choice("dtype", DTYPES, default.dtype),
        show_saved=get.flag("saved", default.show_saved),
        show_attrs=get.flag("attrs", default.show_attrs),
        rankdir=get.choice("rankdir", RANKDIRS, default.rankdir, upper=True),
        max_nodes=get.integer("max_nodes", MAX_NODES_RANGE, default.max_nodes),
        show_gradients=get.flag("gradients", default.show_gradients),
        module_depth=get.integer("depth", MODULE_DEPTH_RANGE, default.module_depth),
        roll=get.flag("roll", default.roll),
    )
    check = CheckInput(wrt=get.text("wrt", ""), expected=get.text("grad", ""))
    program = get.text("program", SEED_PROGRAM) if "program" in params else SEED_PROGRAM
    if "program" not in params and "program_chars" in params:
        # A link made from a program too long for links (see to_query): say why the seed shows.
        chars = get.text("program_chars", "?")
        problems.append(
            f"the program ({chars} characters) was too long for a link (at most {MAX_URL_PROGRAM_CHARS:,}), "
            "so the link left it out and the seed example is shown: ask for the program as a file"
        )
    expanded = _expanded(get.text("expand", ""))
    view = _view(get, "view", problems)
    compare = get.text("compare", "")
    compare_view = _view(get, "compare_view", problems) if compare else ""
    if "compare" not in params and "compare_chars" in params:
        problems.append(f"the second program ({get.text('compare_chars', '?')} characters) was too long for a link "
                        f"beside the first (together at most {MAX_URL_PROGRAM_CHARS:,}), so the link left it out: "
                        "ask for it as a file, or paste it under 'Compare with a second program'")
    state = PageState(program=program, options=options, check=check, expanded=expanded, view=view, compare=compare,
                      compare_view=compare_view)
    return state, problems


def _view(get: _Reader, name: str, problems: list[str]) -> str:
    """A viewer's fragment from `?name=`, "" (and a problem said) when it is too long."""
    view = get.text(name, "").strip().lstrip("#")
    if len(view) > MAX_VIEW_CHARS:
        problems.append(f"ignored ?{name}= ({len(view):,} characters): a view holds at most {MAX_VIEW_CHARS:,}")
        return ""
    return view


def to_query(state: PageState) -> dict[str, str]:
    """The query parameters that reproduce `state` (the inverse of `from_query`).

    The program is left out when it is too long for a URL (see
    `MAX_URL_PROGRAM_CHARS`), and `program_chars` says so to whoever opens
    the link; the check is left out when there is none. The viewer's `view` replaces
    `expand` once there is one (it holds the boxes `expand` opened). A second program (`compare`)
    goes in when both programs fit in `MAX_URL_PROGRAM_CHARS` together, else `compare_chars` says so;
    the panes' view (`compare_view`) goes with it.
    """
    o = state.options
    query: dict[str, str] = {}
    if len(state.program) <= MAX_URL_PROGRAM_CHARS:
        query["program"] = state.program
    else:
        query["program_chars"] = str(len(state.program))
    query.update(
        device=o.device,
        dtype=o.dtype,
        saved="1" if o.show_saved else "0",
        attrs="1" if o.show_attrs else "0",
        rankdir=o.rankdir,
        max_nodes=str(o.max_nodes),
        gradients="1" if o.show_gradients else "0",
        depth=str(o.module_depth),
        roll="1" if o.roll else "0",
    )
    if state.check.expected:
        query.update(wrt=state.check.wrt, grad=state.check.expected)
    if state.view:
        query["view"] = state.view
    elif state.expanded:
        query["expand"] = ",".join(state.expanded)
    if state.compare and len(state.program) + len(state.compare) <= MAX_URL_PROGRAM_CHARS:
        query["compare"] = state.compare
        if state.compare_view:
            query["compare_view"] = state.compare_view
    elif state.compare:
        query["compare_chars"] = str(len(state.compare))
    return {key: _SURROGATE.sub("\ufffd", value) for key, value in query.items()}


def _expanded(raw: str) -> tuple[str, ...]:
    """`?expand=layers.0,layers.1`: the module boxes opened, sorted, without repeats.

    >>> _expanded("layers.1, layers.0,,layers.1")
    ('layers.0', 'layers.1')
    """
    return tuple(sorted({name.strip() for name in raw.split(",") if name.strip()}))


def share_query(state: PageState) -> str:
    """`to_query` as the text after `?` in a link.

    >>> share_query(PageState(program="y = 2*x")).split("&")[0]
    'program=y+%3D+2%2Ax'
    """
    return urlencode(to_query(state))


def with_options(state: PageState, **changes: object) -> PageState:
    """A copy of `state` with some options changed."""
    return replace(state, options=replace(state.options, **changes))  # type: ignore[arg-type]


class _Reader:
    """Reads typed values out of a query, noting what it had to ignore."""

    def __init__(self, params: Mapping[str, str | list[str]], problems: list[str]) -> None:
        self._params = params
        self._problems = problems

    def text(self, key: str, default: str) -> str:
        value = self._params.get(key)
        if isinstance(value, list):  # parse_qs style: the last one wins, as in st.query_params
            value = value[-1] if value else None
        return default if value is None else str(value)

    def _ignore(self, key: str, raw: str, expected: str) -> None:
        self._problems.append(f"ignored ?{key}={raw}: expected {expected}")

    def choice(self, key: str, choices: tuple[str, ...], default: str, *, upper: bool = False) -> str:
        raw = self.text(key, default)
        value = raw.upper() if upper else raw.lower()
        if value in choices:
            return value
        self._ignore(key, raw, "one of " + ", ".join(choices))
        return default

    def flag(self, key: str, default: bool) -> bool:
        raw = self.text(key, "1" if default else "0")
        if raw.lower() in _TRUE:
            return True
        if raw.lower() in _FALSE:
            return False
        self._ignore(key, raw, "1 or 0")
        return default

    def device(self, key: str, default: str) -> str:
        raw = self.text(key, default)
        if _DEVICE.fullmatch(raw):
            return raw
        self._ignore(key, raw, "cpu, cuda or cuda:N (N written with the digits 0-9)")
        return default

    def integer(self, key: str, bounds: tuple[int, int], default: int) -> int:
        raw = self.text(key, str(default))
        low, high = bounds
        try:  # ASCII digits only: int() also reads "1_0" and "٣"
            return whole_number(raw, low=low, high=high)
        except NumberError:
            self._ignore(key, raw, f"a whole number from {low} to {high} written with the digits 0-9")
            return default
