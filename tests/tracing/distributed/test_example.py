"""The distributed example runs as a script and prints what docs/distributed.md shows."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "distributed_fsdp.py"


@pytest.mark.slow
def test_the_example_forecasts_each_world_size_and_compares_the_setups(monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", [str(EXAMPLE), "--world-sizes", "2,8", "--what-if", "4"])
    runpy.run_path(str(EXAMPLE), run_name="__main__")
    out = capsys.readouterr().out
    rows = {line.split("  ")[0]: line for line in out.splitlines()}
    assert [line.split()[:3] for line in out.splitlines() if line.startswith(("2 ", "8 "))] == [
        ["2", "0", "FSDP2"], ["8", "0", "FSDP2"]]
    assert "FSDP+TP" in rows["FSDP2 + TP (tp=2)"]
    assert rows["DDP"].split()[1] == "DDP"  # forecast like the others: DDP's own reducer on fake tensors
    assert all(name in rows for name in ("FSDP2, reshard_after_forward=False", "FSDP2, bf16 parameters",
                                         "FSDP2, checkpointed blocks"))
