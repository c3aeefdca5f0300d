"""The model view works without torch, and the README's model-view section is true."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from manual import manual_text

ROOT = Path(__file__).parents[2]


def test_collapse_summary_and_clusters_work_with_torch_blocked() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "sys.path.insert(0, 'tests/support')\n"
        "from mv_graphs import encoder_graph\n"
        "from graphviz_app.drawing.renderer import render\n"
        "g = encoder_graph(3)\n"
        "print(len(g.module_summary()), 'TransformerEncoderLayer ×3' in render(g, depth=2, roll=True).source)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["23", "True"]  # 2 + 3 layers of 7 modules; the rolled box drawn


def test_readme_documents_the_model_view() -> None:
    text = manual_text()
    section = text.split("<!-- section: modview (owner: modview) -->")[1].split("<!-- end: modview -->")[0]
    for name in ("collapse(", "depth=", "roll=", "expanded=", "module_summary()", "--depth", "--roll"):
        assert name in section, f"README's model view section does not mention {name}"


def test_readme_example_draws_the_rolled_box_it_promises(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    text = manual_text()
    section = text.split("<!-- section: modview (owner: modview) -->")[1].split("<!-- end: modview -->")[0]
    example = section.split("```python\n")[1].split("```")[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(example, "README.md model view", "exec"), {})  # noqa: S102
    svg = (tmp_path / "model.svg").read_text(encoding="utf-8")
    assert "layers.0–5: TransformerEncoderLayer ×6" in svg
    printed = capsys.readouterr().out.splitlines()
    shown = section.split('```text title="Output"\n')[1].split("```")[0].splitlines()
    assert printed[: len(shown) - 1] == shown[:-1]  # the README cuts the table with "..."
