"""`sumo bench game`: where a game's time goes, games per hour, and the paper-scale projection.

Per strategy of agent A (against a non-adapting B) it plays ``concurrent`` short games at once in
one engine (compete/engine.py, what tournament and evolution workers run) and splits the engine's
wall time into physics, policy calls, adaptation and bookkeeping; as the reference, measured in the
same run, it plays a few of the same games one at a time with play_game. Ratios are per game-round.
The meta strategy's adaptation is timed separately at its steady state (a full 75-episode buffer;
four agents adapted in one call, which updates them one after another). RL^2 needs an RL^2 agent:
when A is not one, a fresh zoo-sized RL^2 agent of A's body plays A's part in that row. The paper's
100-round game is projected from the per-round figures, and tournament and evolution wall times
from it for 1..64 workers (local processes or Ray workers, one core each).
"""

from __future__ import annotations

import os
import platform
import resource
import time
from dataclasses import replace

import numpy as np
import torch

from sumo_cli.compete.engine import Fixture, play_games
from sumo_cli.compete.game import AgentData, GameSettings, play_game
from sumo_cli.names import STRATEGIES
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P

#: Share of each strategy in the paper's population (7 combinations: 2 none, 2 track, 2 meta, 1 rl2).
POPULATION_MIX = {"none": 2 / 7, "track": 2 / 7, "meta": 2 / 7, "rl2": 1 / 7}


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def random_agent(body: str, strategy: str, seed: int) -> AgentData:
    """A zoo-sized LSTM agent with fresh weights and the zoo's observation statistics' scale."""
    from sumo_cli.sim.bodies import body_spec

    b = body_spec(body)
    spec = P.PolicySpec("rl2" if strategy == "rl2" else "lstm", b.obs_size, b.n_actions)
    params = P.init_params(spec, torch.Generator().manual_seed(seed))
    stats = nz.new_stats(b.obs_size)
    stats = {"sum": stats["sum"], "sumsq": stats["sumsq"] + 1.0, "count": stats["count"] + 1.0}  # unit std
    return AgentData(f"bench-{body}-{strategy}", 1, body, strategy, spec.to_dict(),
                     {k: v.numpy() for k, v in params.items()}, {k: v.numpy() for k, v in stats.items()})


#: Meta agents adapted together when timing the steady state.
META_TEAM = 4


def meta_steady_state_seconds(a: AgentData, episode_length: int, players: int = 1, rounds: int = 3,
                              episodes: int = 3) -> float:
    """Seconds per round of ``players`` meta agents adapted in one call, once their buffers hold
    75 episodes."""
    from sumo_cli.adapt import strategies as S
    from sumo_cli.meta import MetaConfig

    cfg = MetaConfig()
    team = [a.player() for _ in range(players)]
    S.start_game(team)
    g = torch.Generator().manual_seed(0)
    L, E, D, A = episode_length, episodes, team[0].spec.obs_dim, team[0].spec.act_dim

    def fake_round() -> S.Experience:
        return S.Experience(
            obs=torch.randn(L, E, D, generator=g), actions=torch.randn(L, E, A, generator=g),
            logp=torch.randn(L, E, generator=g) - 10, values=torch.zeros(L, E), rewards=torch.randn(L, E, generator=g),
            prev_rewards=torch.zeros(L, E), prev_dones=torch.zeros(L, E), lengths=torch.full((E,), L),
            terminated=torch.ones(E, dtype=torch.bool), final_values=torch.zeros(E),
        )

    for _ in range(-(-cfg.buffer_episodes // E)):
        S.adapt(team, [fake_round() for _ in team])
    t = time.perf_counter()
    for _ in range(rounds):
        S.adapt(team, [fake_round() for _ in team])
    return (time.perf_counter() - t) / rounds


def _split(results: list, wall: float, rounds: int) -> dict:
    """Per game-round seconds of physics, policy, bookkeeping and adaptation (per adapting round)."""
    n = len(results)
    tot = {k: sum(r.timing.get(k, 0.0) for r in results) for k in ("physics", "policy")}
    adapt = sum(r.timing.get("adapt", r.timing.get("adapt_a", 0.0) + r.timing.get("adapt_b", 0.0)) for r in results)
    book = max(0.0, wall - tot["physics"] - tot["policy"] - adapt)
    steps = sum(e.length for r in results for rr in r.rounds for e in rr.episodes)
    return {
        "games": n, "env_steps": steps, "wall_s": wall,
        "physics_s": tot["physics"], "policy_s": tot["policy"], "adapt_s": adapt, "bookkeeping_s": book,
        "physics": tot["physics"] / (n * rounds), "policy": tot["policy"] / (n * rounds),
        "bookkeeping": book / (n * rounds), "adapt": adapt / (n * max(1, rounds - 1)),
        "mean_episode_length": steps / (n * rounds * len(results[0].rounds[0].episodes)),
    }


def _ratios(x: dict) -> dict:
    ph = max(x["physics"], 1e-12)
    x["policy_over_physics"] = x["policy"] / ph
    x["bookkeeping_over_physics"] = x["bookkeeping"] / ph
    x["adapt_over_physics"] = x["adapt"] / ph
    x["overhead_over_physics"] = (x["policy"] + x["bookkeeping"] + x["adapt"]) / ph
    x["seconds_per_game_round"] = x["physics"] + x["policy"] + x["bookkeeping"] + x["adapt"]
    return x


def run(body_a: str = "ant", body_b: str = "ant", rounds: int = 5, episodes: int = 3, physics: str = "faithful",
        strategies: tuple[str, ...] = STRATEGIES, agents: tuple[AgentData, AgentData] | None = None,
        agents_label: str | None = None, concurrent: int = 32, reference_games: int = 2, paper_rounds: int = 100,
        matches: int = 1000, generations: int = 10, progress=None) -> dict:  # noqa: ANN001
    torch.set_num_threads(1)
    cores = os.cpu_count() or 1
    settings = GameSettings(rounds=rounds, episodes=episodes, physics=physics, threads=1)
    rows = {}
    for strategy in strategies:
        if agents is not None:
            a, b = replace(agents[0], strategy=strategy), agents[1]
            if (strategy == "rl2") != (a.spec["arch"] == "rl2"):
                if strategy != "rl2":
                    continue
                a = random_agent(a.body, "rl2", 1)  # no RL^2 agent given: a fresh one plays A's part
        else:
            a, b = random_agent(body_a, strategy, 1), random_agent(body_b, "none", 2)
        fixtures = [Fixture(i, a, b, settings, 7 + i) for i in range(concurrent)]
        t = time.perf_counter()
        results = [r for _, r in play_games(fixtures, concurrency=concurrent)]
        engine = _split(results, time.perf_counter() - t, rounds)
        ref_results = []
        t = time.perf_counter()
        for f in fixtures[:reference_games]:
            ref_results.append(play_game(f.a, f.b, f.settings, f.seed))
        reference = _split(ref_results, time.perf_counter() - t, rounds) if ref_results else None
        if strategy == "meta":
            length = max(1, int(round(engine["mean_episode_length"])))
            # S.adapt updates meta agents one after another, so a few stand for all of them
            team = min(concurrent, META_TEAM)
            engine["adapt"] = meta_steady_state_seconds(a, length, players=team, episodes=episodes) / team
            if reference is not None:
                reference["adapt"] = meta_steady_state_seconds(a, length, players=1, episodes=episodes)
        row = {"engine": _ratios(engine), "reference": _ratios(reference) if reference else None}
        paper_game = paper_rounds * engine["seconds_per_game_round"]
        row["paper_game_seconds_projected"] = paper_game
        row["games_per_hour_paper_projected"] = 3600.0 / paper_game
        if reference is not None:
            row["engine_speedup_per_game_round"] = reference["seconds_per_game_round"] / engine["seconds_per_game_round"]
        rows[strategy] = row
        if progress is not None:
            progress(strategy, row)
    mix = {s: w for s, w in POPULATION_MIX.items() if s in rows}
    total_w = sum(mix.values())
    mean_game = sum(rows[s]["paper_game_seconds_projected"] * w for s, w in mix.items()) / total_w
    tournament = matches * mean_game
    counts = sorted({1, 2, 4, cores, 16, 64})
    return {
        "cpu": cpu_model(), "cores": cores, "torch_threads_per_game": 1, "physics": physics,
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
        "bodies": [a.body, b.body] if rows else [body_a, body_b], "concurrent_games": concurrent,
        "short_setting": {"rounds": rounds, "episodes": episodes}, "reference_games": reference_games,
        "agents": agents_label or ("given" if agents is not None else "fresh zoo-sized LSTM weights"),
        "strategies": rows,
        "projection": {
            "mean_paper_game_seconds": mean_game,
            "tournament_hours": tournament / cores / 3600.0,
            "tournament_hours_per_workers": {str(c): tournament / c / 3600.0 for c in counts},
            "evolution_hours": generations * tournament / cores / 3600.0,
            "evolution_hours_per_workers": {str(c): generations * tournament / c / 3600.0 for c in counts},
        },
    }
