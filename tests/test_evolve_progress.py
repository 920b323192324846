"""`sumo evolve` shows its progress within a generation, with the time left (a generation at the
paper's scale takes hours)."""

from __future__ import annotations

import io

from rich.console import Console


def test_evolution_shows_progress_within_a_generation(monkeypatch):
    from sumo_cli.cli import evolve_cmd as E

    buf = io.StringIO()
    monkeypatch.setattr(E, "err_console", Console(width=100, file=buf, force_terminal=True, color_system=None))
    progress, on_game = E.progress_view(generations=10, matches=1000, done=0, quiet=False)
    with progress:
        on_game(0, 250)
        progress.refresh()
    out = buf.getvalue()
    assert "generation 1/10" in out and "250/1000 games" in out and "250/10000" in out and "ETA" in out, out
