"""`sumo evolve` shows its progress within a generation, with the time left from the game-rounds
played (a generation at the paper's scale takes hours; a game, minutes)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console


def test_evolution_shows_progress_within_a_generation(monkeypatch):
    from sumo_cli.cli import evolve_cmd as E

    buf = io.StringIO()
    monkeypatch.setattr(E, "err_console", Console(width=100, file=buf, force_terminal=True, color_system=None))
    estimate = E.RunEstimate(rounds_to_play=10000 * 100, workers=2, say=lambda line: None)
    progress, on_game, on_progress = E.progress_view(generations=10, matches=1000, done=0, quiet=False,
                                                     estimate=estimate)
    with progress:
        progress.refresh()
        assert "time left -" in buf.getvalue()
        on_progress(32, 16.0)  # the first round of 32 games in flight, before any game ends
        progress.refresh()
        # 999,968 game-rounds at 0.5 s on each of 2 workers
        assert "time left 69 h 26 min" in buf.getvalue(), buf.getvalue()
        on_game(0, 250)
        progress.refresh()
    out = buf.getvalue()
    assert "generation 1/10" in out and "250/1000 games" in out and "250/10000" in out, out
    assert estimate.seconds_left == pytest.approx(999968 * 0.5 / 2)
