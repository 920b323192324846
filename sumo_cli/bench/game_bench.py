"""`sumo bench game`: where a game's time goes, games per hour, and the paper-scale projection.

Plays short iterated games (agent A with each adaptation strategy against a non-adapting B) and
splits the wall time into physics, policy calls, adaptation and bookkeeping, as play_game measures
them. The paper's 100-round game is projected from the per-round figures, with the meta strategy's
adaptation timed separately at its steady state (a full 75-episode buffer). Tournament and
evolution wall times are projected for this machine's cores and per added core.
"""

from __future__ import annotations

import os
import platform
import time
from dataclasses import replace

import numpy as np
import torch

from sumo_cli.compete.game import AgentData, GameSettings, play_game
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P

STRATEGIES = ("none", "rl2", "track", "meta")
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


def meta_steady_state_seconds(a: AgentData, episode_length: int, rounds: int = 3) -> float:
    """Seconds per round of the meta strategy once its buffer holds 75 episodes."""
    from sumo_cli.learn.meta import MetaConfig
    from sumo_cli.learn.meta_execution import meta_update
    from sumo_cli.learn.strategies import Experience

    cfg = MetaConfig()
    player = a.player()
    player.params = dict(player.theta)
    g = torch.Generator().manual_seed(0)
    L, E, D, A = episode_length, 3, player.spec.obs_dim, player.spec.act_dim

    def fake_round() -> Experience:
        return Experience(
            obs=torch.randn(L, E, D, generator=g), actions=torch.randn(L, E, A, generator=g),
            logp=torch.randn(L, E, generator=g) - 10, values=torch.zeros(L, E), rewards=torch.randn(L, E, generator=g),
            prev_rewards=torch.zeros(L, E), prev_dones=torch.zeros(L, E), lengths=torch.full((E,), L),
            terminated=torch.ones(E, dtype=torch.bool), final_values=torch.zeros(E),
        )

    for _ in range(cfg.buffer_episodes // E):
        meta_update([player], [fake_round()], cfg)
    t = time.perf_counter()
    for _ in range(rounds):
        meta_update([player], [fake_round()], cfg)
    return (time.perf_counter() - t) / rounds


def run(body_a: str = "ant", body_b: str = "ant", rounds: int = 5, episodes: int = 3, physics: str = "faithful",
        strategies: tuple[str, ...] = STRATEGIES, agents: tuple[AgentData, AgentData] | None = None,
        paper_rounds: int = 100, matches: int = 1000, generations: int = 10, progress=None) -> dict:  # noqa: ANN001
    torch.set_num_threads(1)
    cores = os.cpu_count() or 1
    rows = {}
    for strategy in strategies:
        if agents is not None:
            a, b = replace(agents[0], strategy=strategy), agents[1]
            if strategy == "rl2" and a.spec["arch"] != "rl2":
                continue
            if strategy != "rl2" and a.spec["arch"] == "rl2":
                continue
        else:
            a, b = random_agent(body_a, strategy, 1), random_agent(body_b, "none", 2)
        res = play_game(a, b, GameSettings(rounds=rounds, episodes=episodes, physics=physics, threads=1), seed=7)
        t = res.timing
        steps = sum(e.length for r in res.rounds for e in r.episodes)
        per_round = {k: v / rounds for k, v in t.items()}
        adapt_round = t["adapt_a"] / max(1, rounds - 1)  # no adaptation after the last round
        if strategy == "meta":
            mean_len = max(1, int(np.mean([e.length for r in res.rounds for e in r.episodes])))
            adapt_round = meta_steady_state_seconds(a, mean_len)
        sim_round = per_round["physics"] + per_round["policy"] + per_round["bookkeeping"] + per_round["adapt_b"]
        paper_game = paper_rounds * (sim_round + adapt_round)
        rows[strategy] = {
            "wall_seconds": res.wall_seconds,
            "env_steps": steps,
            "physics_s": t["physics"], "policy_s": t["policy"], "adapt_s": t["adapt_a"], "bookkeeping_s": t["bookkeeping"],
            "policy_plus_bookkeeping_over_physics": (t["policy"] + t["bookkeeping"]) / max(t["physics"], 1e-9),
            "adapt_seconds_per_round": adapt_round,
            "adapt_over_round_physics": adapt_round / max(per_round["physics"], 1e-9),
            "games_per_hour_short": 3600.0 / res.wall_seconds,
            "paper_game_seconds_projected": paper_game,
            "games_per_hour_paper_projected": 3600.0 / paper_game,
        }
        if progress is not None:
            progress(strategy, rows[strategy])
    mix = {s: w for s, w in POPULATION_MIX.items() if s in rows}
    total_w = sum(mix.values())
    mean_game = sum(rows[s]["paper_game_seconds_projected"] * w for s, w in mix.items()) / total_w
    tournament = matches * mean_game
    return {
        "cpu": cpu_model(), "cores": cores, "torch_threads_per_game": 1, "physics": physics,
        "bodies": [body_a, body_b], "short_setting": {"rounds": rounds, "episodes": episodes},
        "agents": "given" if agents is not None else "fresh zoo-sized LSTM weights",
        "strategies": rows,
        "projection": {
            "mean_paper_game_seconds": mean_game,
            "tournament_hours": tournament / cores / 3600.0,
            "tournament_hours_per_core_count": {str(c): tournament / c / 3600.0 for c in (cores, cores + 1, 2 * cores, 16, 64)},
            "evolution_hours": generations * tournament / cores / 3600.0,
            "evolution_hours_with_one_more_core": generations * tournament / (cores + 1) / 3600.0,
        },
    }
