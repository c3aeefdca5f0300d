"""Source lines name a file by its path from the package or project root, so files of one name tell apart."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

from graphviz_app import trace_model
from graphviz_app.model import NodeKind

LAYER = """
import torch
from torch import nn

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.tanh(self.fc(x)){extra}
"""


@pytest.fixture
def two_packages(tmp_path: Path) -> Iterator[Path]:
    """zoo/encoder/attention.py and zoo/decoder/attention.py: one file name in two folders of a package."""
    for part, extra in (("encoder", ""), ("decoder", " * 2")):
        folder = tmp_path / "zoo" / part
        folder.mkdir(parents=True)
        (folder / "__init__.py").write_text("")
        (folder / "attention.py").write_text(LAYER.format(extra=extra))
    (tmp_path / "zoo" / "__init__.py").write_text("")
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m == "zoo" or m.startswith("zoo.")]:
            del sys.modules[name]


def test_files_of_the_same_name_in_two_packages_are_told_apart(two_packages: Path) -> None:
    encoder = importlib.import_module("zoo.encoder.attention").Block()
    decoder = importlib.import_module("zoo.decoder.attention").Block()
    graph = trace_model(nn.Sequential(encoder, decoder), torch.randn(2, 4))
    tanh = sorted(n.source or "" for n in graph.of_kind(NodeKind.OP) if n.name == "TanhBackward0")
    assert tanh == ["zoo/decoder/attention.py:11 in forward", "zoo/encoder/attention.py:11 in forward"]


def test_a_script_outside_any_package_is_named_from_the_folder_on_sys_path(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "tagger_model.py").write_text(LAYER.format(extra=""))
    sys.path.insert(0, str(tmp_path))
    try:
        block = importlib.import_module("tools.tagger_model").Block()  # a namespace folder: no __init__.py
        graph = trace_model(block, torch.randn(2, 4))
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("tools.tagger_model", None)
        sys.modules.pop("tools", None)
    sources = {n.source for n in graph.of_kind(NodeKind.OP) if n.name == "TanhBackward0"}
    assert sources == {"tools/tagger_model.py:11 in forward"}


def test_torch_s_own_lines_carry_the_path_inside_torch() -> None:
    graph = trace_model(nn.Linear(3, 2), torch.randn(1, 3))
    sources = {n.source for n in graph.of_kind(NodeKind.OP)}
    assert len(sources) == 1
    assert sources.pop().startswith("torch/nn/modules/linear.py:")
