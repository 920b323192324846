"""PPO tracking: the paper's adaptation baseline (iii), "keep training with PPO during the game".

Between two rounds, a ``track`` player turns the round's episodes into a
:class:`~sumo_cli.ppo.rollout.Rollout` and runs one PPO update on its ``params``, with Adam's
moments kept in ``player.scratch`` for the whole game (created at the first update, forgotten by
:func:`~sumo_cli.adapt.strategies.start_game`). All the track players of one policy spec that a
process adapts after a round are updated together with stacked parameters
(:mod:`sumo_cli.ppo.stacked_ppo`); a player alone is the same computation for a group of one.

Layout: the E padded episodes ``(L, E, ...)`` of an :class:`~sumo_cli.adapt.players.Experience`
are concatenated in time into **one column** of ``T = sum(lengths)`` steps, so padding never
enters the update (no mask is needed, nothing past an episode's length is read). Each episode's
first step is flagged ``first`` (the recurrent state is zeroed there, as in the game, where every
non-RL^2 player starts each episode from a zero state); its last step is ``terminated`` (a decided
bout: bootstrap 0) or ``truncated`` (the step limit's draw, or an unstable bout: bootstrap with
``final_values``). For the LSTM, the states at the BPTT window starts are recomputed with the
behaviour parameters (the ``params`` the round was played with), all episodes unrolled in parallel,
so the first epoch's importance ratios are 1; the values of the round's steps (and of each
episode's final observation) come out of the same unroll, rather than from a second pass per player
in the game. Behaviour log-probabilities are those the game recorded (and the values, for the MLP).

:data:`TRACK_CONFIG` is the update used at test time: the paper's PPO values (clip 0.2, lr 3e-4,
gamma 0.995, lambda 0.95, BPTT 10, 4 minibatches per epoch: its 32,000-episode epochs of 8,000-episode
minibatches) with ``reward_scale`` = 0.01 (the scale :mod:`sumo_cli.selfplay.selfplay` trains the value
function with; the game hands over faithful rewards, dense + sparse, of order 1,000) and **2 epochs**
per round. The paper does not give tracking's epochs. A round is 3 bouts, a few hundred steps, and
Adam's steps over so little data are mostly noise: in 32 seeded games of 100 rounds
(``python -m benchmarks.track_epochs``), zoo-ant-lstm-v3 tracking against zoo-bug-lstm-v3 won 49%
of its bouts in rounds 68-100 without adapting, 42% with 2 epochs and 26% with 10;
zoo-spider-lstm-v3 against zoo-ant-lstm-v3 54%, 46% and 34%. (The paper, too, finds tracking no
better than no adaptation, sometimes worse.) Each epoch costs about 0.06 of the round's physics
(the update's forward and backward through both LSTMs of every agent), so 2 epochs also keep a
game's computation beside its physics under 0.3 of the physics.

Deterministic: the minibatch order comes from a generator seeded with 0 at the game's first update.
"""

from __future__ import annotations

from dataclasses import replace

import torch

from sumo_cli.ppo.ppo import PPOConfig
from sumo_cli.ppo.rollout import Rollout
from sumo_cli.ppo.stacked_ppo import AgentState, lstm_states, stacked_ppo_update
from sumo_cli.adapt.players import Experience, Player
from sumo_cli.nets import policy as P

TRACK_CONFIG = PPOConfig(epochs=2, num_minibatches=4, reward_scale=0.01)

#: The fewest rows (steps x episodes) of the stacked unroll's matrix products (see
#: :func:`_window_states_many`).
MIN_ROWS = 64


def _episode_index(lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(step, episode) of every step of the concatenation, in order."""
    steps = [torch.arange(int(n)) for n in lengths]
    eps = [torch.full((int(n),), e, dtype=torch.long) for e, n in enumerate(lengths)]
    return torch.cat(steps), torch.cat(eps)


def _window_starts(lengths: torch.Tensor, L: int) -> tuple[list[int], list[int]]:
    """(step within its episode, episode) at which each window of L steps of the column starts."""
    s_idx, e_idx = _episode_index(lengths)
    starts = torch.arange(0, len(s_idx), L)
    return s_idx[starts].tolist(), e_idx[starts].tolist()


def _window_states_many(spec: P.PolicySpec, params: list[P.Params], xs: list[torch.Tensor],
                        starts: list[tuple[list[int], list[int]]]) -> list[tuple[dict, torch.Tensor]]:
    """Per player, ``(states, values)``: the states fed into steps 0, L, 2L, ... of its concatenated
    column, ``(C, 1, H)``, and the values of every step of its ``xs``. Every player's E episodes are
    unrolled in parallel from a zero state with its behaviour parameters, all players of the same E
    stacked in one unroll (:func:`~sumo_cli.ppo.stacked_ppo.lstm_states`; a player alone is a
    group of one)."""
    out: list = [None] * len(params)
    groups: dict[int, list[int]] = {}
    for i, x in enumerate(xs):
        groups.setdefault(x.shape[1], []).append(i)
    for E, idx in groups.items():
        # matrix products over fewer rows than a few vector registers' worth take another BLAS
        # path, which rounds differently: every unroll covers at least MIN_ROWS rows
        T = max(max(xs[i].shape[0] for i in idx), -(-MIN_ROWS // E))
        x = torch.stack([torch.cat([xs[i], xs[i].new_zeros(T - xs[i].shape[0], *xs[i].shape[1:])]) for i in idx], 1)
        stacked = {k: torch.stack([params[i][k].detach() for i in idx]) for k in params[idx[0]]}
        record: dict[int, list[tuple[int, int, int]]] = {}
        for g, i in enumerate(idx):
            for slot, (t, e) in enumerate(zip(*starts[i])):
                record.setdefault(t, []).append((g, slot, e))
        states, values = lstm_states(spec, stacked, x, record)
        for g, st in enumerate(states):
            out[idx[g]] = ({k: torch.stack(s)[:, None] for k, s in st.items()}, values[g, :xs[idx[g]].shape[0]])
    return out


def _net_input(spec: P.PolicySpec, params: P.Params, obs_stats: dict, obs: torch.Tensor, prev_rewards: torch.Tensor,
               prev_dones: torch.Tensor) -> torch.Tensor:
    from sumo_cli.ppo.collect import net_input

    dtype = params["logstd"].dtype
    return net_input(spec, obs_stats, obs.to(dtype), prev_rewards.to(dtype), prev_dones.to(dtype))


def _with_values(exp: Experience, v: torch.Tensor) -> Experience:
    """``exp`` with the values of its steps and of its final observations taken from ``v``
    ``(L + 1, E)``, the values over :meth:`~sumo_cli.adapt.players.Experience.with_final_step`."""
    L, E = exp.obs.shape[:2]
    valid = torch.arange(L)[:, None] < exp.lengths[None]
    v = v.to(exp.values.dtype)
    return replace(exp, values=torch.where(valid, v[:L], torch.zeros_like(v[:L])),
                   final_values=v[exp.lengths, torch.arange(E)])


def experience_to_rollout(spec: P.PolicySpec, params: P.Params, obs_stats: dict, exp: Experience, bptt_len: int,
                          chunk_states: dict | None = None) -> Rollout:
    """One column ``(sum(lengths), 1)`` holding every episode of ``exp`` one after another (see
    the module docstring). ``params`` are the behaviour parameters (used for the LSTM's window
    start states only, unless ``chunk_states`` brings them)."""
    lengths = exp.lengths.to(torch.long)
    if (lengths < 1).any():
        raise ValueError("every episode of a round must have at least one step")
    s_idx, e_idx = _episode_index(lengths)
    T = len(s_idx)

    def take(a: torch.Tensor) -> torch.Tensor:  # (L, E, ...) -> (T, 1, ...)
        return a[s_idx, e_idx].unsqueeze(1)

    ends = torch.cumsum(lengths, 0) - 1
    terminated = torch.zeros(T, 1, dtype=torch.bool)
    truncated = torch.zeros(T, 1, dtype=torch.bool)
    final_values = torch.zeros(T, 1, dtype=exp.values.dtype)
    term = exp.terminated.to(torch.bool)
    terminated[ends, 0] = term
    truncated[ends, 0] = ~term
    final_values[ends, 0] = torch.where(term, torch.zeros_like(exp.final_values), exp.final_values.to(final_values.dtype))
    first = (s_idx == 0).unsqueeze(1)
    state0: dict = {}
    if spec.recurrent:
        if chunk_states is None:
            x = _net_input(spec, params, obs_stats, exp.obs, exp.prev_rewards, exp.prev_dones)
            ((chunk_states, _),) = _window_states_many(spec, [params], [x], [_window_starts(lengths, bptt_len)])
        state0 = {k: v[0].clone() for k, v in chunk_states.items()}
    else:
        chunk_states = {}
    return Rollout(
        obs=take(exp.obs), actions=take(exp.actions), logp=take(exp.logp), values=take(exp.values),
        rewards=take(exp.rewards), terminated=terminated, truncated=truncated, first=first,
        final_values=final_values, last_values=torch.zeros(1, dtype=exp.values.dtype), state0=state0,
        prev_rewards=take(exp.prev_rewards), prev_dones=take(exp.prev_dones),
        state_reset=first.clone(), task_end=(terminated | truncated).clone(),
        chunk_len=bptt_len if spec.recurrent else 0, chunk_states=chunk_states, norm_stats=obs_stats,
    )


def track_update_many(players: list[Player], experiences: list[Experience],
                      cfg: PPOConfig | None = None) -> list[dict[str, float]]:
    """One PPO update of each player's ``params`` on its round's experience, all players (of one
    policy spec) in one stacked computation (:func:`~sumo_cli.ppo.stacked_ppo.stacked_ppo_update`);
    each gets what it gets updated alone. Adam's moments and the minibatch generator carry over from
    round to round within a game (``player.scratch``). Returns PPO's statistics per player."""
    cfg = cfg or TRACK_CONFIG
    if not players:
        return []
    spec = players[0].spec
    if any(p.spec != spec for p in players):
        raise ValueError("players updated together must share one policy spec")
    states = []
    for p in players:
        if "track" not in p.scratch:
            p.scratch["track"] = AgentState(torch.Generator().manual_seed(0))
            p.scratch["track_updates"] = 0
        states.append(p.scratch["track"])
    states0: list = [None] * len(players)
    if spec.recurrent:
        # the values too come out of the stacked unroll that gives the window states: the game
        # leaves them to this update (strategies.game_computes_values)
        inputs = [_net_input(spec, p.params, p.obs_stats, *e.with_final_step()) for p, e in zip(players, experiences)]
        starts = [_window_starts(e.lengths.to(torch.long), cfg.bptt_len) for e in experiences]
        unrolled = _window_states_many(spec, [p.params for p in players], inputs, starts)
        states0 = [st for st, _ in unrolled]
        experiences = [_with_values(e, v) for e, (_, v) in zip(experiences, unrolled)]
    rollouts = [experience_to_rollout(spec, p.params, p.obs_stats, e, cfg.bptt_len, st)
                for p, e, st in zip(players, experiences, states0)]
    params = [{k: v.detach() for k, v in p.params.items()} for p in players]
    stats = stacked_ppo_update(spec, params, states, rollouts, [p.obs_stats for p in players], cfg)
    for p, new in zip(players, params):
        p.params = new
        p.scratch["track_updates"] += 1
    return stats


def track_update(player: Player, exp: Experience, cfg: PPOConfig | None = None) -> dict[str, float]:
    """:func:`track_update_many` of one player (the same computation, a group of one)."""
    return track_update_many([player], [exp], cfg)[0]
