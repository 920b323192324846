"""`sumo bench game`: games per hour, where a game's time goes, paper-scale projections."""

from __future__ import annotations

from typing import Optional

import typer

from sumo_cli.cli.common import err_console, friendly, open_db, print_json


@friendly
def game(
    ctx: typer.Context,
    rounds: int = typer.Option(5, "--rounds", help="Rounds of each measured (short) game."),
    episodes: int = typer.Option(3, "--episodes", help="Episodes per round."),
    physics: str = typer.Option("faithful", "--physics", help="faithful or fast."),
    agents: Optional[str] = typer.Option(
        None, "--agents", help="A,B from the database (default: fresh zoo-sized LSTM agents, Ant vs Ant)."
    ),
    strategies: str = typer.Option("none,rl2,track,meta", "--strategies", help="Strategies of A to measure."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """Time short games per strategy of A and project the paper's tournament and evolution."""
    from rich.table import Table

    from sumo_cli.bench.game_bench import STRATEGIES, run
    from sumo_cli.cli.common import require_positive
    from sumo_cli.errors import UserError

    require_positive(rounds, "--rounds")
    require_positive(episodes, "--episodes")
    chosen = tuple(s.strip() for s in strategies.split(",") if s.strip())
    unknown = [s for s in chosen if s not in STRATEGIES]
    if unknown or not chosen:
        raise UserError(f"--strategies takes some of {', '.join(STRATEGIES)}; got {strategies!r}")
    pair = None
    if agents:
        from sumo_cli.compete.game import AgentData
        from sumo_cli.library import load_agent

        names = [a for a in agents.split(",") if a.strip()]
        if len(names) != 2:
            raise UserError("--agents takes exactly two names, A,B")
        db = open_db(ctx)
        pair = tuple(AgentData.from_loaded(load_agent(db, n)) for n in names)
    doc = run(rounds=rounds, episodes=episodes, physics=physics, strategies=chosen, agents=pair,
              progress=lambda s, row: err_console.print(f"measured {s}: {row['wall_seconds']:.1f} s"))
    if json_out:
        print_json(doc)
        return
    err_console.print(f"{doc['cpu']}, {doc['cores']} cores; {doc['agents']}; {rounds} rounds x {episodes} episodes, {physics} physics")
    t = Table(title="where a game's time goes (A's strategy vs a non-adapting B)")
    for col in ("strategy", "env steps", "physics s", "policy s", "adapt s", "bookkeeping s",
                "(policy+book)/physics", "adapt/round", "adapt/round physics", "games/h short", "games/h paper*"):
        t.add_column(col, justify="right")
    for s, r in doc["strategies"].items():
        t.add_row(s, str(r["env_steps"]), f"{r['physics_s']:.2f}", f"{r['policy_s']:.2f}", f"{r['adapt_s']:.2f}",
                  f"{r['bookkeeping_s']:.2f}", f"{r['policy_plus_bookkeeping_over_physics']:.2f}",
                  f"{r['adapt_seconds_per_round']:.3f} s", f"{r['adapt_over_round_physics']:.2f}x",
                  f"{r['games_per_hour_short']:.0f}", f"{r['games_per_hour_paper_projected']:.1f}")
    err_console.print(t)
    p = doc["projection"]
    err_console.print(
        f"* projected from the measured rounds (meta at a full 75-episode buffer). Paper-scale tournament "
        f"(1000 games of 100 rounds): {p['tournament_hours']:.1f} h on {doc['cores']} cores; evolution (10 x 1000 games): "
        f"{p['evolution_hours']:.0f} h; with one more core: {p['evolution_hours_with_one_more_core']:.0f} h. "
        "By cores: " + ", ".join(f"{c}: {h:.1f} h" for c, h in p["tournament_hours_per_core_count"].items())
    )
