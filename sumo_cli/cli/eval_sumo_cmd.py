"""`sumo eval sumo`: a trained agent's learning curve under the faithful rules: seeded bouts of
chosen versions against a motionless body, random actions and stored agents."""

from __future__ import annotations

from typing import Optional

import typer

from sumo_cli.cli.common import check_agents, check_output, err_console, friendly, open_db, print_json
from sumo_cli.vocabulary import check_physics


def _pick(versions: list[int], wanted: Optional[str], points: int, has_start: bool = True) -> list[int]:
    from sumo_cli.errors import UserError

    if wanted:
        try:
            chosen = sorted({int(v) for v in wanted.split(",") if v.strip()})
        except ValueError:
            raise UserError(f"--versions takes comma-separated version numbers, got {wanted!r}") from None
        missing = [v for v in chosen if v != 0 and v not in versions]
        if missing:
            span = f"{versions[0]}..{versions[-1]}" if versions else "none"
            raise UserError(f"no version {missing[0]} stored (versions: {span}; 0 is the untrained start)")
        return chosen
    if points < 2:
        raise UserError(f"--points must be at least 2, got {points}")
    # the stored versions nearest to evenly spread points (an agent shipped or imported keeps only a
    # few versions, and has no untrained start to play as version 0)
    last = versions[-1]
    near = {min(versions, key=lambda v: abs(v - last * i / (points - 1))) for i in range(1, points)}
    return sorted(near | ({0} if has_start else set()))


#: Bouts per round when a point is played as a game (the paper's 3).
GAME_EPISODES = 3


def _game_summary(me, opp, rounds: int, seed: int, physics: str) -> dict:  # noqa: ANN001
    """One iterated game of ``me`` against ``opp`` (a stored agent's AgentData, or (kind, body) of a
    fixed opponent), ``me`` adapting between rounds: its bouts' win, draw and loss rates."""
    from sumo_cli.compete.game import AgentData, FixedOpponent, GameSettings, play_game

    b = opp if isinstance(opp, AgentData) else FixedOpponent(opp[0], opp[1] or me.body)
    result = play_game(me, b, GameSettings(rounds=rounds, episodes=GAME_EPISODES, physics=physics), seed)
    eps = [e for rd in result.rounds for e in rd.episodes]
    n = len(eps)
    return {"win_rate": sum(e.outcome == "win" for e in eps) / n, "draw_rate": sum(e.outcome == "draw" for e in eps) / n,
            "loss_rate": sum(e.outcome == "loss" for e in eps) / n, "mean_length": sum(e.length for e in eps) / n,
            "mean_steps_to_close": None, "bouts": n,
            "rounds_won": result.rounds_won_a, "rounds_lost": result.rounds_won_b}


@friendly
def sumo_curve(
    ctx: typer.Context,
    agent: str = typer.Argument(..., help="A trained agent (sumo train), e.g. push-ant."),
    versions: Optional[str] = typer.Option(None, "--versions", help="Comma-separated versions (0 = the untrained start). Default: --points spread evenly."),
    points: int = typer.Option(6, "--points", help="How many versions to spread from 0 to the latest (default 6)."),
    against: str = typer.Option("motionless,random", "--against", help="Comma-separated opponents: motionless, random (of the agent's own body; motionless-bug, random-ant, ... name another body), or stored agents (name@v)."),
    bouts: int = typer.Option(16, "--bouts", help="Seeded bouts per version and opponent (default 16)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bouts (the same for every version)."),
    physics: str = typer.Option("faithful", "--physics", help="faithful (RK4, default) or fast."),
    face_opponent: bool = typer.Option(False, "--face-opponent", help="Start the bouts turned toward each other (the training curriculum's start; default: the reference start)."),
    rounds: Optional[int] = typer.Option(None, "--rounds", help="Play each point as an iterated game of this many rounds of 3 bouts, the agent adapting between rounds by its strategy (tracking, meta, RL^2) as it does in games; the rates are over all its bouts. Default: independent bouts, no adaptation."),
    plot: Optional[str] = typer.Option(None, "--plot", help="Write the curve (win rate and steps to close against env steps) to this PNG."),
    csv_out: Optional[str] = typer.Option(None, "--csv", help="Write the curve (one row per version and opponent) to this CSV file."),
    json_out: bool = typer.Option(False, "--json", help="Print the curve as JSON on stdout."),
) -> None:
    """Play each chosen version of AGENT against each opponent from the reference start: win, draw
    and loss rates, and how fast it closes in on the opponent, against the env steps it trained."""
    from sumo_cli.errors import UserError

    from sumo_cli.compete.limits import check_at_most

    check_at_most(rounds or 1, "--rounds")
    if bouts < 1:
        raise UserError(f"--bouts must be at least 1, got {bouts}")
    if rounds is not None and rounds < 1:
        raise UserError(f"--rounds must be at least 1, got {rounds}")
    check_physics(physics)
    check_output(plot, "--plot", ".png")
    check_output(csv_out, "--csv", ".csv")
    opponents = [o.strip() for o in against.split(",") if o.strip()]
    if not opponents:
        raise UserError("--against is empty; give motionless, random or agent names")
    from sumo_cli.names import without_strategy

    if rounds is None:  # in games (--rounds) every agent adapts by its strategy, or the one after ':'
        for text in (agent, *opponents):
            without_strategy(text, "`sumo eval sumo` without --rounds", "its bouts are single episodes, in which no agent adapts")

    db = open_db(ctx)
    check_agents(db, [agent])
    from sumo_cli.store import library
    from sumo_cli.compete.bouts import MOTIONLESS, RANDOM, play_bouts, summary
    from sumo_cli.compete.game import AgentData
    from sumo_cli.sim.bodies import BODIES

    stored, steps_per_version, theta0 = library.training_curve_points(db, agent)
    if not stored:
        raise UserError(f"agent {agent!r} has no versions yet")
    chosen = _pick(stored, versions, points, has_start=theta0 is not None)
    if 0 in chosen and theta0 is None:
        raise UserError(f"{agent!r} was not trained here, so it has no untrained start (version 0); pick stored versions")
    fixed = {f"{kind}-{b}": (kind, b) for kind in (MOTIONLESS, RANDOM) for b in BODIES}
    fixed.update({MOTIONLESS: (MOTIONLESS, None), RANDOM: (RANDOM, None)})
    opp_data = {o: (fixed[o] if o in fixed else AgentData.from_loaded(library.load_agent(db, o))) for o in opponents}
    name = library.load_agent(db, agent).name
    rows = []
    from sumo_cli.cli.common import log_lines

    lines = log_lines("points", len(chosen) * len(opponents), 0, json_out)
    with err_console.status("playing bouts") as status:
        for v in chosen:
            played_as = agent.partition(":")[2].strip()
            loaded = (library.load_start(db, name, theta0) if v == 0 else
                      library.load_agent(db, f"{name}@{v}" + (f":{played_as}" if played_as else "")))
            me = AgentData.from_loaded(loaded)
            for o in opponents:
                status.update(f"{name}@{v} against {o}")
                opp = opp_data[o]
                if rounds is not None:
                    s = _game_summary(me, opp, rounds, seed, physics)
                else:
                    if isinstance(opp, AgentData) and opp.spec.get("arch") == "rl2" or me.spec.get("arch") == "rl2":
                        raise UserError("RL^2 agents need their reward inputs: evaluate them as they play in games (--rounds)")
                    kind, body = opp if isinstance(opp, tuple) else (opp, None)
                    s = summary(play_bouts(me, kind, bouts, seed, physics=physics, opp_body=body, face_opponent=face_opponent))
                rows.append({"version": v, "env_steps": v * steps_per_version if steps_per_version else None,
                             "opponent": o, **s})
                lines.update(len(rows), f"{name}@{v} against {o}: win {s['win_rate']:.0%}")
    doc = {"agent": name, "bouts": bouts if rounds is None else rounds * GAME_EPISODES, "seed": seed, "physics": physics,
           "start": "facing" if face_opponent else "reference", "adapting": rounds is not None, "curve": rows}
    if plot:
        from sumo_cli.report.curves import learning_curve

        learning_curve(doc, plot)
    if csv_out:
        from sumo_cli.report.csv_export import write_csv

        write_csv(csv_out, [{"agent": name, **r} for r in rows])
    if json_out:
        print_json(doc)
        return
    err_console.print(curve_table(doc))
    if plot:
        err_console.print(f"curve written to {plot}")
    if csv_out:
        err_console.print(f"curve written to {csv_out}")


def curve_table(doc: dict):  # noqa: ANN201 - a rich Table
    """The curve as a table that keeps the opponents' names and every figure whole at any width."""
    from sumo_cli.cli.tables import whole_words_table

    cells = [[str(r["version"]), f"{r['env_steps']:,}" if r["env_steps"] is not None else "-", r["opponent"],
              f"{r['win_rate']:.0%}", f"{r['draw_rate']:.0%}", f"{r['loss_rate']:.0%}", f"{r['mean_length']:.0f}",
              "-" if r.get("mean_steps_to_close") is None else f"{r['mean_steps_to_close']:.0f}"] for r in doc["curve"]]
    how = f"{doc['bouts']} bouts in games, adapting," if doc.get("adapting") else f"{doc['bouts']} bouts"
    return whole_words_table(f"{doc['agent']}: {how} per point, {doc['physics']} physics, seed {doc['seed']}",
                             ["version", "env steps", "opponent", "win", "draw", "loss", "mean length", "steps to close"],
                             cells, err_console.width, drop_order=("mean length", "env steps"), left=("opponent",))
