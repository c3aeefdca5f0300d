"""The zoo against PyTorch's MemTracker: measure, replay and meta forecast within their tolerances on every model.

Gaps still open are listed in KNOWN with what causes them, as strict expected failures:
a fix shows as an unexpected pass, and a new gap fails the suite with the model's name.
"""

from __future__ import annotations

from functools import cache

import pytest
from mem_oracle import ZooRow, compare
from mem_zoo import ZOO, by_name

pytestmark = pytest.mark.slow

CASES = [(m.name, b) for m in ZOO for b in m.batches]

# (model, batch, check) -> why it is outside its tolerance today.
KNOWN: dict[tuple[str, int, str], str] = {
    ("t5", 4, "measure"): "MemTracker's own module hooks make the step hold 1% more (our counter nested inside "
                          "MemTracker counts MemTracker's figure; alone, the step holds what we measure)",
    ("bart", 4, "measure"): "0.8% under MemTracker, as t5",
    ("whisper", 4, "measure"): "0.57% under MemTracker, as t5 (our counter nested inside MemTracker reads its "
                               "figure to the byte: tests/memory/test_memory_whisper.py)",
}


@cache
def _row(name: str, batch: int) -> ZooRow:
    return compare(by_name(name).spec, batch)


def _check(name: str, batch: int, check: str, ok: bool, text: str) -> None:
    why = KNOWN.get((name, batch, check))
    if why is not None:
        if ok:
            pytest.fail(f"{name} at batch {batch}: {check} is now within tolerance; remove it from KNOWN ({why})")
        pytest.xfail(f"{name} at batch {batch}: {why} ({text})")
    assert ok, f"{name} at batch {batch}: {text}"


@pytest.mark.parametrize(("name", "batch"), CASES)
def test_measure_is_memtrackers_figure(name: str, batch: int) -> None:
    r = _row(name, batch)
    ok = abs(r.measured - r.memtracker) <= 0.005 * r.memtracker
    _check(name, batch, "measure", ok, f"measured {r.measured} B, MemTracker {r.memtracker} B")


@pytest.mark.parametrize(("name", "batch"), CASES)
def test_replay_is_within_3_percent_of_measured(name: str, batch: int) -> None:
    r = _row(name, batch)
    ok = abs(r.replay - r.measured) <= 0.03 * r.measured
    _check(name, batch, "replay", ok, f"replay {r.replay} B, measured {r.measured} B")


@pytest.mark.parametrize(("name", "batch"), CASES)
def test_the_forecast_is_within_1_percent_even_where_memtracker_fake_is_not(name: str, batch: int) -> None:
    r = _row(name, batch)
    if r.forecast is None:
        _check(name, batch, "forecast", False, f"the forecast failed: {r.forecast_error}")
        return
    ok = abs(r.forecast - r.measured) <= 0.01 * r.measured
    if not ok and r.memtracker_fake is not None and abs(r.memtracker_fake - r.measured) > 0.01 * r.measured:
        # where MemTracker under FakeTensorMode is off too, the forecast is held to its figure (the fake kernels
        # differ from the CPU's: UNet2D at batch 1, +1.5% both)
        ok = abs(r.forecast - r.memtracker_fake) <= 0.001 * r.memtracker_fake
    # and where it fails (ViT, ConvNeXt, Mixtral, the LSTM, ...) the forecast still runs and is within 1%
    _check(name, batch, "forecast", ok, f"forecast {r.forecast} B, measured {r.measured} B, MemTracker under "
           f"FakeTensorMode {r.memtracker_fake if r.memtracker_fake is not None else r.fake_error}")
