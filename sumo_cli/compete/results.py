"""The results of a stored tournament or evolution, rebuilt from the database alone (no checkpoint
is loaded, nothing is written), for `sumo runs show`: the leaderboard as the run left it, with
Bradley-Terry strengths and the per-kind summaries; an evolution's shares per generation."""

from __future__ import annotations

from collections import Counter

from sumo_cli.compete import ratings as R
from sumo_cli.compete.population import Member
from sumo_cli.compete.schedule import apply_generation, random_pairs
from sumo_cli.compete.tournament import Leaderboard, Standing
from sumo_cli.compete.categories import category_summary
from sumo_cli.store import runs as store_runs
from sumo_cli.store.database import Database


def tournament_results(db: Database, run_id: int) -> dict:
    """``{"run_id", "rated", "total", "leaderboard", "categories", "draw_probability"}``: the games
    stored so far rated in schedule order up to the first missing one, exactly as the run rates them."""
    with db.read() as s:
        run = store_runs.get_run(s, run_id, "tournament")
        config, seed = dict(run.config), run.seed
        outcomes = store_runs.run_outcomes(s, run_id)
    members = [Member(**m) for m in config["members"]]
    schedule = random_pairs(len(members), config["matches"], seed)
    game = config.get("game", {})
    draw = config.get("draw_probability") or R.equal_agents_draw_probability(game.get("rounds", 100),
                                                                              game.get("episodes", 3))
    env = R.make_env(draw)
    standings = [Standing(m, 0) for m in members]
    rated = 0
    while rated < len(schedule) and rated in outcomes:
        g, outcome = schedule[rated], outcomes[rated]
        sa, sb = standings[g.a], standings[g.b]
        sa.rating, sb.rating = R.rate_game(env, sa.rating, sb.rating, outcome)
        for st, side in ((sa, "a"), (sb, "b")):
            st.count(outcome, side)
        rated += 1
    bt = None
    if rated:
        games = [(schedule[i].a, schedule[i].b, outcomes[i]) for i in range(rated)]
        point, low, high = R.bradley_terry_bootstrap(len(members), games, samples=200, seed=seed)
        bt = {m.name: (float(p), float(lo), float(hi)) for m, p, lo, hi in zip(members, point, low, high)}
    rows = Leaderboard(run_id, rated, len(schedule), standings, bt).to_rows()
    return {"run_id": run_id, "rated": rated, "total": len(schedule), "leaderboard": rows,
            "categories": category_summary(rows), "draw_probability": draw}


def shares(members: list[Member], slots: list[int]) -> dict[str, dict[str, float]]:
    """Share of the slots by body, architecture, strategy and kind (body-arch-strategy)."""
    out = {}
    for key, fn in (("body", lambda m: m.body), ("arch", lambda m: m.arch), ("strategy", lambda m: m.strategy),
                    ("kind", lambda m: f"{m.body}-{m.kind}")):
        c = Counter(fn(members[i]) for i in slots)
        out[key] = {k: v / len(slots) for k, v in sorted(c.items())}
    return out


def evolution_results(db: Database, run_id: int) -> dict:
    """``{"run_id", "generations", "current"}``: the shares of every stored generation, 0 first, and
    for a run still short of its last generation, the one in play: its number, the games played of
    it, and the shares those games give if the generation ended now (a paper-scale evolution runs
    for days; this is what it says before its first generation is complete). ``current`` is None
    for a finished run."""
    with db.read() as s:
        run = store_runs.get_run(s, run_id, "evolution")
        config, seed = dict(run.config), run.seed
        generations = store_runs.run_generations(s, run_id)
        outcomes = store_runs.run_outcomes(s, run_id)
    members = [Member(**m) for m in config["members"]]
    copies = config["copies"]
    start = generations.get(0, {})
    member_of = {vid: slot // copies for slot, vid in start.items()}  # generation 0: slot s holds member s // copies
    history, slots = [], []
    for g in range(config["generations"] + 1):
        if g not in generations:
            break
        slots = [member_of[vid] for _, vid in sorted(generations[g].items())]
        history.append(shares(members, slots))
    current = None
    g = len(history) - 1
    if slots and g < config["generations"]:
        matches = config["matches"]
        base = g * matches
        played = {i - base: o for i, o in outcomes.items() if base <= i < base + matches}
        schedule = [x for x in random_pairs(len(slots), matches, seed, g) if x.index in played]
        so_far, _ = apply_generation(slots, schedule, played)
        current = {"generation": g + 1, "played": len(played), "games": matches, "shares": shares(members, so_far)}
    return {"run_id": run_id, "generations": history, "current": current}
