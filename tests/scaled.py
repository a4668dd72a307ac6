"""A bundled scenario at another time scale, for real-engine tests that need less wall time.

The checks of such tests read emulated time, which the scale does not change.
The file is rewritten, not the parsed model patched, so the run records (and
validates) exactly the scenario it ran.
"""

from __future__ import annotations

from pathlib import Path

from emulator.scenario import Scenario, bundled_scenarios, load_scenario


def bundled_at_scale(name: str, scale: float, directory: Path, bundled: float = 0.5) -> Scenario:
    """Bundled scenario ``name`` (whose file says ``time_scale = bundled``) written to
    ``directory`` with ``time_scale = scale`` and loaded from there."""
    text = bundled_scenarios()[name].read_text()
    line = f"\ntime_scale = {bundled}\n"
    assert line in text, f"{name}: no {line.strip()!r} line"
    path = directory / f"{name}.toml"
    path.write_text(text.replace(line, f"\ntime_scale = {scale}\n"))
    scenario = load_scenario(path)
    assert scenario.name == name and scenario.time_scale == scale
    return scenario
