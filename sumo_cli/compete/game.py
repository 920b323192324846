"""The iterated adaptation game (paper, Sec. 4.2): K rounds of E bouts between two agents that
adapt between rounds.

A round's E episodes run as one batch of bouts (both agents' policies evaluated in one batched call
per step each); after the round each agent's strategy turns its experience into the parameters of
the next round. States are reset at the start of the game. With a learning opponent, B plays round
r with version ``start + r``, as if it kept training by self-play.

This module is plain computation: it takes agent data and returns results; the caller stores them.
RL^2 runs its E episodes of a round as E parallel streams; stream j continues its recurrent state
from stream j of the previous round (the state lives for the whole game with one opponent).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Callable

import numpy as np
import torch

from sumo_cli.compete.rules import game_outcome, round_outcome
from sumo_cli.compete.schedule import game_seed
from sumo_cli.adapt import strategies as S
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P
from sumo_cli.nets.numpy_actor import NumpyActor
from sumo_cli.nets.policy import PolicySpec


@dataclass
class AgentData:
    """An agent version as plain data (what crosses process boundaries to a game worker)."""

    name: str
    version: int
    body: str
    strategy: str
    spec: dict
    params: dict[str, np.ndarray]
    obs_stats: dict[str, np.ndarray]
    meta: dict[str, np.ndarray] = field(default_factory=dict)
    trained_strategy: str | None = None  # None: the same as ``strategy`` (see library.LoadedAgent)

    @property
    def display(self) -> str:
        text = f"{self.name}@{self.version}"
        played_as = self.trained_strategy is not None and self.strategy != self.trained_strategy
        return f"{text}:{self.strategy}" if played_as else text

    @classmethod
    def from_loaded(cls, agent) -> "AgentData":  # noqa: ANN001 - a library.LoadedAgent
        return cls(
            name=agent.name,
            version=agent.version,
            body=agent.body,
            strategy=agent.strategy,
            spec=agent.spec.to_dict(),
            params={k: v.numpy() for k, v in agent.params.items()},
            obs_stats={k: v.numpy() for k, v in agent.obs_stats.items()},
            meta={k: v.numpy() for k, v in agent.meta_params.items()},
            trained_strategy=agent.trained_strategy,
        )

    def default_step_sizes_note(self) -> str | None:
        """One line saying that this agent, played with ``meta`` (``NAME:meta``) though it learnt
        no step sizes (it was not meta-trained), adapts with the untrained ones; None otherwise.
        Such an agent is played, not refused, so any policy can adapt without a training run."""
        from sumo_cli.adapt.meta_execution import LOG_ALPHA_KEY, game_config

        if self.strategy != "meta" or LOG_ALPHA_KEY in self.meta:
            return None
        cfg = game_config()
        how = (f"one gradient step of size {cfg.alpha_init:g} after every round" if cfg.execution == "continue" else
               f"{cfg.num_steps} gradient steps of size {cfg.alpha_init:g} from its trained parameters on its last "
               f"{cfg.buffer_episodes} episodes every round")
        return (f"{self.display} learnt no step sizes (it was trained as {self.trained_strategy or 'none'}), so it "
                f"adapts with the untrained ones: {how}")

    def player(self) -> S.Player:
        return S.Player(
            name=self.display,
            strategy=self.strategy,
            spec=PolicySpec.from_dict(self.spec),
            theta={k: torch.from_numpy(np.asarray(v, dtype=np.float32)) for k, v in self.params.items()},
            obs_stats={k: torch.from_numpy(np.asarray(v, dtype=np.float64)) for k, v in self.obs_stats.items()},
            meta={k: torch.from_numpy(np.asarray(v)) for k, v in self.meta.items()},
        )


@dataclass(frozen=True)
class FixedOpponent:
    """A body that does not learn or adapt: ``motionless`` (zero torques) or ``random`` (uniform
    torques in [-1, 1]), as in :mod:`sumo_cli.compete.bouts`; an adaptive agent can be measured
    against it as it plays in games."""

    kind: str  # "motionless" | "random"
    body: str
    version: int = 0

    @property
    def display(self) -> str:
        return f"{self.kind}-{self.body}"


class _FixedSide:
    """The side of a :class:`FixedOpponent`: no policy, no experience, no adaptation."""

    def __init__(self, opponent: FixedOpponent, E: int, n_actions: int, seed: int):
        if opponent.kind not in ("motionless", "random"):
            raise ValueError(f"unknown fixed opponent {opponent.kind!r}")
        self.kind, self.E, self.n_actions = opponent.kind, E, n_actions
        self.rng = np.random.default_rng(game_seed(seed, 0xF1D))

    def start_round(self) -> None:
        pass

    def act(self, t: int, obs: np.ndarray) -> np.ndarray:
        if self.kind == "random":
            return self.rng.uniform(-1.0, 1.0, (self.E, self.n_actions))
        return np.zeros((self.E, self.n_actions))

    def record(self, t: int, reward: np.ndarray, active: np.ndarray) -> None:
        pass

    def bouts_ended(self, final_obs: np.ndarray, ended: np.ndarray) -> None:
        pass


@dataclass
class GameSettings:
    rounds: int = 100  # paper: 100 rounds
    episodes: int = 3  # paper: 3 episodes (bouts) per round
    physics: str = "faithful"  # "faithful" (RK4, as the original) or "fast" (implicitfast)
    threads: int = 1  # physics threads inside this game (games themselves run in parallel)


@dataclass
class EpisodeResult:
    outcome: str  # from A's side: "win", "loss", "draw"
    reason: str  # "ring_out", "fall", "timeout", "unstable"
    length: int


@dataclass
class RoundResult:
    index: int
    version_a: int
    version_b: int
    outcome: str  # "a", "b", "draw"
    wins_a: int
    wins_b: int
    draws: int
    episodes: list[EpisodeResult]


@dataclass
class GameResult:
    a: str
    b: str
    seed: int
    settings: dict
    outcome: str
    rounds_won_a: int
    rounds_won_b: int
    rounds_drawn: int
    rounds: list[RoundResult]
    timing: dict
    wall_seconds: float

    def to_dict(self) -> dict:
        return asdict(self)


_EPISODE_OUTCOME = {1: "win", 2: "loss", 3: "draw"}


class _Side:
    """One agent's side of the bouts of a round: the policy call per step and the round's buffers.

    Only the policy net runs at every step, in NumPy (:class:`~sumo_cli.nets.numpy_actor.NumpyActor`:
    a torch call per step costs more in dispatch than in arithmetic at 3 bouts); the round's action
    noise is drawn in one torch call at its start. Log-probabilities are computed once per round,
    and values only for the agents whose strategy needs them (after the round, in one sequence pass)."""

    def __init__(self, player: S.Player, E: int, max_len: int, generator: torch.Generator):
        self.E = E
        self.max_len = max_len
        self.gen = generator
        self.set_player(player)
        spec = player.spec
        self.obs = np.zeros((max_len, E, spec.obs_dim), dtype=np.float32)
        self.actions = np.zeros((max_len, E, spec.act_dim), dtype=np.float32)
        self.means = np.zeros((max_len, E, spec.act_dim), dtype=np.float32)
        self.rew = np.zeros((max_len, E), dtype=np.float32)
        self.prev_r = np.zeros((max_len, E), dtype=np.float32)
        self.prev_d = np.zeros((max_len, E), dtype=np.float32)
        self.state = None
        self.prev_reward = np.zeros(E, dtype=np.float32)
        self.prev_done = np.zeros(E, dtype=np.float32)

    def set_player(self, player: S.Player) -> None:
        self.p = player
        # The normaliser is fixed during a game: compute mean and std once, not at every step.
        mean, std = nz.mean_std(player.obs_stats)
        self.norm_mean, self.norm_std = mean.float(), std.float()
        self.state = None

    def _input(self, obs: torch.Tensor, prev_reward: torch.Tensor, prev_done: torch.Tensor) -> torch.Tensor:
        x = torch.clamp((obs - self.norm_mean) / self.norm_std, -nz.CLIP, nz.CLIP)
        if self.p.spec.arch == "rl2":
            x = P.rl2_input(x, prev_reward, prev_done)
        return x

    def start_round(self) -> None:
        spec = self.p.spec
        self.viewer = spec.viewer(self.E)  # every bout of the round starts now
        self.final_seen = np.zeros((self.E, spec.obs_dim), dtype=np.float32)  # each bout's last view
        # Parameters change between rounds (adaptation): the actor is rebuilt from the current ones.
        self.actor = NumpyActor(spec, self.p.params, self.norm_mean, self.norm_std)
        if self.p.carries_state and self.state is not None:
            # RL^2: the state carries on; the new episode is flagged through prev_done.
            self.prev_done = np.ones(self.E, dtype=np.float32)
        else:
            self.state = self.actor.initial_state(self.E)
            self.prev_reward = np.zeros(self.E, dtype=np.float32)
            self.prev_done = np.zeros(self.E, dtype=np.float32)
        self.state0 = P.initial_state(spec, self.E)
        if self.state is not None:
            self.state0.update({"pi/h": torch.from_numpy(self.state[0].copy()), "pi/c": torch.from_numpy(self.state[1].copy())})
        noise = torch.randn((self.max_len, self.E, spec.act_dim), generator=self.gen)
        self.scaled_noise = (noise * torch.exp(self.p.params["logstd"].detach())).numpy()

    def act(self, t: int, obs: np.ndarray) -> np.ndarray:
        obs = self.viewer.view(obs)
        mean, state = self.actor.step(obs, self.state, self.prev_reward, self.prev_done)
        return self.commit(t, obs, mean, state)

    def commit(self, t: int, obs: np.ndarray, mean: np.ndarray, state) -> np.ndarray:  # noqa: ANN001
        """Record step ``t``'s input (the viewer's view of the raw observation) and the policy's mean
        and new state, however they were computed (alone or stacked with other games), and return
        the action."""
        self.prev_r[t], self.prev_d[t] = self.prev_reward, self.prev_done
        self.state = state
        action = mean + self.scaled_noise[t]
        self.obs[t], self.means[t], self.actions[t] = obs, mean, action
        return action.astype(np.float64)

    def bouts_ended(self, final_obs: np.ndarray, ended: np.ndarray) -> None:
        """Keep the view of the last observation of the bouts ``ended`` (a mask), for the values that
        bootstrap a time-out."""
        self.final_seen[ended] = self.viewer.view(final_obs, record=False)[ended]

    def record(self, t: int, reward: np.ndarray, active: np.ndarray) -> None:
        r = np.where(active, reward, 0.0).astype(np.float32)
        self.rew[t] = r
        self.prev_reward = r
        self.prev_done = np.zeros(self.E, dtype=np.float32)

    @torch.no_grad()
    def experience(self, lengths: np.ndarray, terminated: np.ndarray) -> S.Experience:
        L = int(lengths.max())
        E = self.E
        spec, params = self.p.spec, self.p.params
        obs_l, means, actions = (torch.from_numpy(x[:L].copy()) for x in (self.obs, self.means, self.actions))
        rew, prev_r_l, prev_d_l = (torch.from_numpy(x[:L].copy()) for x in (self.rew, self.prev_r, self.prev_d))
        logp = P.log_prob(means, params["logstd"], actions)
        mask = torch.arange(L)[:, None] < torch.from_numpy(lengths)[None]
        exp = S.Experience(
            obs=obs_l, actions=actions, logp=logp * mask, values=torch.zeros(L, E), rewards=rew,
            prev_rewards=prev_r_l, prev_dones=prev_d_l, lengths=torch.from_numpy(lengths.astype(np.int64)),
            terminated=torch.from_numpy(terminated), final_values=torch.zeros(E), state0=self.state0,
            final_obs=torch.from_numpy(self.final_seen.copy()),
        )
        if S.game_computes_values(self.p):
            _, v, _ = P.forward_sequence(spec, params, self._input(*exp.with_final_step()), self.state0)
            exp.values, exp.final_values = v[:L] * mask, v[exp.lengths, torch.arange(E)]
        return exp


def round_result(index: int, version_a: int, version_b: int, outcome: np.ndarray, reason: np.ndarray,
                 lengths: np.ndarray) -> RoundResult:
    """A round from its episodes' outcome and reason codes (BatchedSumo's) and lengths."""
    from sumo_cli.sim.sumo_env import REASONS

    eps = [EpisodeResult(_EPISODE_OUTCOME[int(o)], REASONS[int(c)], int(n)) for o, c, n in zip(outcome, reason, lengths)]
    wins_a = sum(e.outcome == "win" for e in eps)
    wins_b = sum(e.outcome == "loss" for e in eps)
    return RoundResult(index, version_a, version_b, round_outcome(wins_a, wins_b), wins_a, wins_b,
                       len(eps) - wins_a - wins_b, eps)


def game_result(a: str, b: str, seed: int, settings: GameSettings, rounds: list[RoundResult], timing: dict,
                wall: float) -> GameResult:
    won_a = sum(rr.outcome == "a" for rr in rounds)
    won_b = sum(rr.outcome == "b" for rr in rounds)
    return GameResult(
        a=a, b=b, seed=seed, settings=asdict(settings), outcome=game_outcome(won_a, won_b, len(rounds)),
        rounds_won_a=won_a, rounds_won_b=won_b, rounds_drawn=len(rounds) - won_a - won_b, rounds=rounds,
        timing=timing, wall_seconds=wall,
    )


def play_game(
    a: AgentData,
    b: AgentData | list[AgentData] | FixedOpponent,
    settings: GameSettings,
    seed: int,
    on_round: Callable[[RoundResult], None] | None = None,
    on_step: Callable[[int, object, object, np.ndarray | None], None] | None = None,
    stop_after: int | None = None,
) -> GameResult:
    """Play one iterated game. ``b`` may be a list of versions, one per round (learning opponent).

    ``on_step(round, env, step_result, active)`` is called after each round's reset (with
    ``step_result`` and ``active`` None) and after every env step: videos record poses through it.
    ``stop_after`` ends the game after that round (0-based), e.g. to replay up to a chosen round.
    ``b`` may be a :class:`FixedOpponent` (a motionless or random body), against which A adapts as in
    any game."""
    from sumo_cli.sim.sumo_env import MAX_STEPS, BatchedSumo

    if settings.rounds < 1 or settings.episodes < 1:
        raise ValueError("a game needs at least one round of at least one episode")
    b_versions = b if isinstance(b, list) else [b]
    if len(b_versions) not in (1, settings.rounds):
        raise ValueError("a learning opponent needs one version per round")
    torch.set_num_threads(1)  # tiny batched calls: threads cost more than they give; games run in parallel
    t_start = time.perf_counter()
    timing = {"physics": 0.0, "policy": 0.0, "adapt_a": 0.0, "adapt_b": 0.0}
    E = settings.episodes
    torch_gen = torch.Generator().manual_seed(game_seed(seed, 0xAC7))
    pa = a.player()
    fixed = isinstance(b_versions[0], FixedOpponent)
    pb_all = [] if fixed else [v.player() for v in b_versions]
    S.start_game([pa, *pb_all[:1]])
    env = BatchedSumo(a.body, b_versions[0].body, E, physics=settings.physics, seed=seed, auto_reset=False,
                      n_threads=settings.threads)
    max_len = MAX_STEPS + 1
    side_a = _Side(pa, E, max_len, torch_gen)
    pb = None if fixed else pb_all[0]
    side_b = _FixedSide(b_versions[0], E, env.spec_b.n_actions, seed) if fixed else _Side(pb, E, max_len, torch_gen)
    rounds: list[RoundResult] = []
    last = settings.rounds - 1 if stop_after is None else min(stop_after, settings.rounds - 1)
    try:
        for r in range(last + 1):
            if len(pb_all) > 1 and r > 0:
                # The learning opponent's next version: it keeps no adaptation state from the last.
                pb = pb_all[r]
                S.start_game([pb])
                side_b.set_player(pb)
            obs_a, obs_b = env.reset(seed=game_seed(seed, r))
            if on_step is not None:
                on_step(r, env, None, None)
            side_a.start_round()
            side_b.start_round()
            lengths = np.zeros(E, dtype=np.int64)
            outcome = np.zeros(E, dtype=np.int8)
            reason = np.zeros(E, dtype=np.int8)
            t = 0
            while not env.finished.all():
                active = ~env.finished
                t0 = time.perf_counter()
                act_a = side_a.act(t, obs_a)
                act_b = side_b.act(t, obs_b)
                t1 = time.perf_counter()
                res = env.step(act_a, act_b)
                t2 = time.perf_counter()
                timing["policy"] += t1 - t0
                timing["physics"] += t2 - t1
                if on_step is not None:
                    on_step(r, env, res, active)
                side_a.record(t, res.dense_a + res.sparse_a, active)
                side_b.record(t, res.dense_b + res.sparse_b, active)
                ended = res.done & active
                if ended.any():
                    lengths[ended] = res.length[ended]
                    outcome[ended] = res.outcome[ended]
                    reason[ended] = res.reason[ended]
                    side_a.bouts_ended(res.final_obs_a, ended)
                    side_b.bouts_ended(res.final_obs_b, ended)
                obs_a, obs_b = res.obs_a, res.obs_b
                t += 1
            terminated = (reason == 1) | (reason == 2)  # ring-out or fall; a time-out (or unstable) draw is a truncation
            rr = round_result(r, a.version, b_versions[min(r, len(b_versions) - 1)].version, outcome, reason, lengths)
            rounds.append(rr)
            if on_round is not None:
                on_round(rr)
            if r == last:
                break
            exp_a = side_a.experience(lengths, terminated) if pa.strategy in S.ADAPTING else None
            exp_b = side_b.experience(lengths, terminated) if pb is not None and pb.strategy in S.ADAPTING else None
            t3 = time.perf_counter()
            S.adapt([pa], [exp_a])
            t4 = time.perf_counter()
            if len(pb_all) == 1:
                S.adapt([pb], [exp_b])
            t5 = time.perf_counter()
            timing["adapt_a"] += t4 - t3
            timing["adapt_b"] += t5 - t4
    finally:
        env.close()
    wall = time.perf_counter() - t_start
    timing["bookkeeping"] = max(0.0, wall - sum(timing.values()))
    return game_result(a.display, b_versions[0].display, seed, settings, rounds, timing, wall)
