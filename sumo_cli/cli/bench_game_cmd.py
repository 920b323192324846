"""`sumo bench game`: games per hour, where a game's time goes, paper-scale projections."""

from __future__ import annotations

from typing import Optional

import typer

from sumo_cli.cli.common import err_console, friendly, open_db, print_json


#: What `sumo bench game` measures by default: trained agents whose bouts last as long as real
#: games' (fresh random weights fall within ~40 steps, rounds with little physics in them).
DEFAULT_AGENTS = ("ant-lstm", "bug-lstm")


def _has_agents(db, names: tuple[str, ...]) -> bool:  # noqa: ANN001
    from sumo_cli.store import registry

    with db.read() as s:
        return all(registry.get_agent(s, n) is not None for n in names)


@friendly
def game(
    ctx: typer.Context,
    rounds: int = typer.Option(5, "--rounds", help="Rounds of each measured (short) game."),
    episodes: int = typer.Option(3, "--episodes", help="Episodes per round."),
    physics: str = typer.Option("faithful", "--physics", help="faithful or fast."),
    agents: Optional[str] = typer.Option(
        None, "--agents", help="A,B from the database (default: the shipped ant-lstm,bug-lstm where the database has "
        "them, else fresh zoo-sized LSTM agents, Ant vs Ant). RL^2 is measured with a fresh RL^2 agent of A's body "
        "unless A is one. A:STRATEGY measures that strategy of A only; B:STRATEGY is the strategy B plays with."
    ),
    strategies: Optional[str] = typer.Option(None, "--strategies", help="Strategies of A to measure (default: none,rl2,track,meta)."),
    concurrent: int = typer.Option(32, "--concurrent", help="Games played at once in the measured engine."),
    reference_games: int = typer.Option(2, "--reference-games", help="Games played one at a time as the reference."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON."),
) -> None:
    """Time short games per strategy of A and project the paper's tournament and evolution."""
    from rich.table import Table

    from sumo_cli.bench.game_bench import STRATEGIES, run
    from sumo_cli.cli.common import require_positive
    from sumo_cli.errors import UserError

    require_positive(rounds, "--rounds")
    require_positive(episodes, "--episodes")
    require_positive(concurrent, "--concurrent")
    if reference_games < 0:
        raise UserError(f"--reference-games must be at least 0, got {reference_games}")
    names = []
    if agents:
        names = [a.strip() for a in agents.split(",") if a.strip()]
        if len(names) != 2:
            raise UserError("--agents takes exactly two names, A,B")
    from sumo_cli.names import parse

    a_plays = parse(names[0]).played_as if names else None
    if a_plays is not None:
        if strategies is not None:
            raise UserError(f"A's strategy is given twice ({names[0]} and --strategies); give one of them")
        strategies, names[0] = a_plays, names[0].rpartition(":")[0]
    strategies = strategies if strategies is not None else ",".join(STRATEGIES)
    chosen = tuple(s.strip() for s in strategies.split(",") if s.strip())
    unknown = [s for s in chosen if s not in STRATEGIES]
    if unknown or not chosen:
        raise UserError(f"--strategies takes some of {', '.join(STRATEGIES)}; got {strategies!r}")
    db = open_db(ctx)
    if not agents:
        names = list(DEFAULT_AGENTS) if _has_agents(db, DEFAULT_AGENTS) else []
    pair, label = None, "fresh zoo-sized LSTM weights"
    if names:
        from sumo_cli.compete.game import AgentData
        from sumo_cli.store.library import load_agent

        pair = tuple(AgentData.from_loaded(load_agent(db, n)) for n in names)
        label = ",".join(names)
    doc = run(rounds=rounds, episodes=episodes, physics=physics, strategies=chosen, agents=pair, agents_label=label,
              concurrent=concurrent, reference_games=reference_games,
              progress=lambda s, row: err_console.print(f"measured {s}: {row['engine']['wall_s']:.1f} s"))
    if json_out:
        print_json(doc)
        return
    err_console.print(f"{doc['cpu']}, {doc['cores']} cores; {doc['agents']}; {rounds} rounds x {episodes} episodes, "
                      f"{physics} physics; {concurrent} games at once against {reference_games} one at a time")
    t = Table(title="seconds per game-round, and as a share of its physics (A's strategy vs a non-adapting B)")
    for col in ("strategy", "games", "physics", "policy", "bookkeeping", "adapt", "overhead/physics",
                "reference overhead/physics", "speed-up", "games/h paper*"):
        t.add_column(col, justify="right")
    for s, r in doc["strategies"].items():
        e, ref = r["engine"], r["reference"]
        t.add_row(s, str(e["games"]), f"{e['physics']:.3f}", f"{e['policy']:.3f} ({e['policy_over_physics']:.2f})",
                  f"{e['bookkeeping']:.3f} ({e['bookkeeping_over_physics']:.2f})",
                  f"{e['adapt']:.3f} ({e['adapt_over_physics']:.2f})", f"{e['overhead_over_physics']:.2f}",
                  f"{ref['overhead_over_physics']:.2f}" if ref else "-",
                  f"{r['engine_speedup_per_game_round']:.2f}x" if ref else "-", f"{r['games_per_hour_paper_projected']:.1f}")
    err_console.print(t)
    p = doc["projection"]
    err_console.print(
        "* one core, projected from the measured rounds (meta at a full 75-episode buffer). Paper-scale tournament "
        "(1000 games of 100 rounds) and evolution (10 x 1000 games), by workers (local processes or Ray workers, one "
        "core each): " + ", ".join(f"{c}: {h:.1f} h / {p['evolution_hours_per_workers'][c]:.0f} h"
                                   for c, h in p["tournament_hours_per_workers"].items())
    )
