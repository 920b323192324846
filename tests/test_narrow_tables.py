"""At 80 columns (a pipe, a CI log) tables keep every name and figure whole."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

NAMES = ["ant-meta@1", "ant-meta@2", "zoo-spider-lstm-v3@12", "spider-mlp-track@1234"]


def _render(monkeypatch, module, tables, width: int) -> str:
    buf = io.StringIO()
    console = Console(width=width, file=buf, color_system=None)
    monkeypatch.setattr(module, "err_console", console)
    for table in tables():
        console.print(table)
    return buf.getvalue()


@pytest.mark.parametrize("width", [80, 100, 200])
def test_leaderboard_keeps_names_and_figures_whole(monkeypatch, width):
    from sumo_cli.cli import tournament_cmd as T

    rows = [dict(rank=i, agent=n, mu=25.1234 - i, sigma=8.333, conservative=-10.17 + i, games=123, wins=100, draws=3,
                 losses=20, bradley_terry=dict(strength=0.8, low=-0.33, high=1.95)) for i, n in enumerate(NAMES, 1)]
    out = _render(monkeypatch, T, lambda: [T.leaderboard_table(rows, "final leaderboard, run 3 (1000 games)")], width)
    assert max(len(line) for line in out.splitlines()) <= width
    assert "…" not in out
    words = out.split()
    for r in rows:
        for figure in (r["agent"], f"{r['mu']:.2f}", f"{r['conservative']:.2f}", "100/3/20", "+0.80", "(-0.33,", "+1.95)"):
            assert figure in words, (figure, out)


@pytest.mark.parametrize("width", [80, 120])
def test_locomotion_results_keep_intervals_whole(monkeypatch, width):
    from sumo_cli.cli import eval_cmd as E

    results = [dict(agent=a, strategy=s, pair=p, mean=[-13.62 + k for k in range(7)], ci95=[10.81] * 7)
               for a, s in (("loco-mlp-track@120", "none"), ("loco-mlp-meta@120", "meta")) for p in ("back", "middle", "front")]
    out = _render(monkeypatch, E, lambda: E.locomotion_tables(results, 50, 7), width)
    assert max(len(line) for line in out.splitlines()) <= width
    assert "…" not in out
    words = out.split()
    for k in range(7):
        assert f"{-13.62 + k:.1f}" in words
    assert "±10.8" in words and "loco-mlp-track@120" in words and "loco-mlp-meta@120" in words


@pytest.mark.parametrize("width", [80, 140])
def test_eval_sumo_curve_keeps_the_opponents_whole(monkeypatch, width):
    from sumo_cli.cli import eval_sumo_cmd as C

    curve = [dict(version=v, env_steps=v * 32768, opponent=o, win_rate=0.5, draw_rate=0.25, loss_rate=0.25,
                  mean_length=312.4, mean_steps_to_close=41.0)
             for v in (0, 120, 600) for o in ("motionless-ant", "motionless-bug", "zoo-spider-lstm-v3@1")]
    doc = dict(agent="spider-lstm", bouts=48, physics="faithful", seed=1, curve=curve)
    out = _render(monkeypatch, C, lambda: [C.curve_table(doc)], width)
    assert max(len(line) for line in out.splitlines()) <= width
    assert "…" not in out
    words = out.split()
    assert {"motionless-ant", "motionless-bug", "zoo-spider-lstm-v3@1", "19,660,800"} <= set(words)


@pytest.mark.parametrize("width", [80, 140])
def test_a_meta_runs_iterations_keep_iteration_and_figures_whole(monkeypatch, width):
    from sumo_cli.cli import runs_cmd as R

    metrics = dict(alpha=0.9, win_rate=0.5, draw_rate=0.2, loss_rate=0.3, mean_return=-123.4, mean_min_dist=1.23,
                   meta_alpha_0=0.512, meta_alpha_1=0.498, meta_alpha_2=0.501, heldout_return_adapted=-100.5,
                   heldout_return_unadapted=-110.25, heldout_gain=9.75, heldout_gain_ci95=4.5,
                   heldout_specific_gain=1.25, heldout_specific_gain_ci95=3.5, steps_per_second=1234.0)
    iterations = [dict(iteration=k, env_steps=131072 * k, wall_seconds=60.0, metrics=metrics) for k in range(1, 4)]
    out = _render(monkeypatch, R, lambda: R._print_iterations({"env": "sumo"}, iterations, None) or [], width)
    assert max(len(line) for line in out.splitlines()) <= width
    assert "…" not in out
    words = out.split()
    assert {"393,216", "-123.4", "9.8"} <= set(words)
