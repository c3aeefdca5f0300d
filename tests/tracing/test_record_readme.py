"""The README's "Model view: recording" examples run as written and show what they say."""

from __future__ import annotations

import contextlib
import io
import re

from manual import manual_text


def _recording_examples() -> list[str]:
    text = manual_text()
    found = re.search(r"<!-- section: recording \(owner: recorder\) -->(.*?)<!-- end: recording -->", text, re.S)
    assert found is not None, "the manual lost its recording section markers"
    return re.findall(r"```python\n(.*?)```", found.group(1), re.S)


def test_readme_recording_examples_run_and_print_modules_and_lines() -> None:
    examples = _recording_examples()
    assert len(examples) == 2
    scope: dict[str, object] = {}
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for example in examples:
            exec(compile(example, "README.md recording", "exec"), scope)  # noqa: S102
    lines = printed.getvalue().splitlines()
    assert lines[0].startswith("AddmmBackward0 2 torch/nn/modules/linear.py:")  # as the comment in the README says
    assert lines[-1].startswith("[('', 'Sequential', 58), ")
    graph = scope["graph"]  # the second example's, traced from a recorded forward
    assert {n.module for n in graph.nodes if n.name == "AddmmBackward0"} == {"0", "2"}  # type: ignore[attr-defined]
