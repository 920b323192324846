"""PPO tracking (the ``track`` adaptation strategy): padded round experience -> one PPO update."""

from __future__ import annotations

import pytest
import torch

from sumo_cli.adapt import strategies as S
from sumo_cli.ppo.collect import net_input
from sumo_cli.ppo.ppo import chunked_evaluation
from sumo_cli.adapt.tracking import TRACK_CONFIG, experience_to_rollout, track_update, track_update_many
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P

D, A = 3, 2


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny networks: intra-op threads only contend (on a loaded 2-core machine a 16x16 matmul
    took milliseconds with 2 threads)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def make_player(arch: str, strategy: str = "track", seed: int = 0) -> S.Player:
    spec = P.PolicySpec(arch, D, A, hidden=16)
    theta = P.init_params(spec, torch.Generator().manual_seed(seed))
    stats = nz.update(nz.new_stats(D), torch.randn(200, D, generator=torch.Generator().manual_seed(1)))
    p = S.Player(name=f"p-{arch}", strategy=strategy, spec=spec, theta=theta, obs_stats=stats)
    S.start_game([p])
    return p


@torch.no_grad()
def play_round(p: S.Player, lengths: list[int], gen: torch.Generator, sign: float = 1.0) -> S.Experience:
    """Episodes of a contextual bandit: random observations, reward = sign x first action component.
    Padding past each episode's length is NaN, so any use of it poisons the update."""
    E, L = len(lengths), max(lengths)
    spec = p.spec
    obs = torch.randn(L, E, D, generator=gen)
    acts, logp, vals = torch.zeros(L, E, A), torch.zeros(L, E), torch.zeros(L, E)
    state = P.initial_state(spec, E)
    zeros = torch.zeros(E)
    for t in range(L):
        x = net_input(spec, p.obs_stats, obs[t], zeros, zeros)
        mean, v, state = P.forward(spec, p.params, x, state)
        a = P.sample(mean, p.params["logstd"], gen)
        acts[t], logp[t], vals[t] = a, P.log_prob(mean, p.params["logstd"], a), v
    rewards = sign * acts[..., 0]
    lens = torch.tensor(lengths)
    pad = torch.arange(L)[:, None] >= lens[None, :]
    for arr in (obs, acts):
        arr[pad] = float("nan")
    for arr in (logp, vals, rewards):
        arr[pad] = float("nan")
    return S.Experience(
        obs=obs, actions=acts, logp=logp, values=vals, rewards=rewards,
        prev_rewards=torch.zeros(L, E), prev_dones=torch.zeros(L, E), lengths=lens,
        terminated=torch.tensor([i % 2 == 0 for i in range(E)]), final_values=torch.zeros(E),
        state0=P.initial_state(spec, E), final_obs=torch.randn(E, D, generator=gen),
    )


def probe_mean(p: S.Player) -> torch.Tensor:
    obs = torch.randn(64, D, generator=torch.Generator().manual_seed(5))
    x = net_input(p.spec, p.obs_stats, obs, torch.zeros(64), torch.zeros(64))
    with torch.no_grad():
        mean, _, _ = P.forward(p.spec, p.params, x, P.initial_state(p.spec, 64))
    return mean.mean(0)


@pytest.mark.parametrize("arch", ["mlp", "lstm"])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_tracking_moves_the_policy_toward_the_rewarded_action(arch, sign):
    p = make_player(arch)
    gen = torch.Generator().manual_seed(2)
    before = probe_mean(p)
    theta = {k: v.clone() for k, v in p.theta.items()}
    for _ in range(40):  # 40 rounds: two epochs a round move the mean about 0.001 a round
        stats = track_update(p, play_round(p, [150, 90, 61], gen, sign))
        assert all(torch.isfinite(v).all() for v in p.params.values())
        assert stats["num_grad_steps"] == TRACK_CONFIG.epochs * TRACK_CONFIG.num_minibatches
    moved = probe_mean(p) - before
    assert sign * moved[0] > 0.02, moved  # toward the rewarded direction
    assert sign * moved[0] > abs(moved[1]), moved  # more than along the unrewarded dimension
    # the trained parameters are never touched; the optimiser lives in the player's scratch
    assert all(torch.equal(theta[k], p.theta[k]) for k in theta)
    assert p.scratch["track_updates"] == 40
    assert not any(v.requires_grad for v in p.params.values())


@pytest.mark.parametrize("arch", ["mlp", "lstm"])
def test_rollout_reproduces_the_behaviour_log_probabilities(arch):
    """The concatenated column, evaluated as PPO does (windows from the recomputed LSTM states,
    resets at episode starts), gives back the game's log-probabilities and values: the first
    epoch's importance ratios are 1."""
    p = make_player(arch)
    exp = play_round(p, [17, 30, 4, 9], torch.Generator().manual_seed(3))
    ro = experience_to_rollout(p.spec, p.params, p.obs_stats, exp, TRACK_CONFIG.bptt_len)
    assert ro.num_steps == 17 + 30 + 4 + 9 and ro.num_envs == 1
    logp, values = chunked_evaluation(p.spec, p.params, ro, p.obs_stats, TRACK_CONFIG.bptt_len)
    torch.testing.assert_close(logp, ro.logp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(values, ro.values, atol=1e-5, rtol=1e-5)
    # episode boundaries: first at starts, terminated/truncated at the ends as the experience says
    ends = torch.cumsum(exp.lengths, 0) - 1
    assert ro.first[:, 0].nonzero().flatten().tolist() == [0, 17, 47, 51]
    assert ro.terminated[ends, 0].tolist() == exp.terminated.tolist()
    assert ro.truncated[ends, 0].tolist() == (~exp.terminated).tolist()
    assert int((ro.terminated | ro.truncated).sum()) == 4


def test_lstm_update_computes_the_values_the_net_gives_step_by_step():
    """An LSTM tracker's update takes the values of the round's steps and of each episode's final
    observation from its own stacked unroll (the game leaves them out): they equal the net's values
    stepped one episode at a time from a zero state, final observation appended."""
    from sumo_cli.adapt.tracking import _net_input, _window_starts, _window_states_many, _with_values

    players = [make_player("lstm", seed=s) for s in range(3)]
    assert not S.game_computes_values(players[0]) and S.game_computes_values(make_player("mlp"))
    lengths = [[17, 30, 4], [1, 2, 1], [60, 9, 33]]
    gen = torch.Generator().manual_seed(3)
    exps = [play_round(p, n, gen) for p, n in zip(players, lengths)]
    inputs = [_net_input(p.spec, p.params, p.obs_stats, *e.with_final_step()) for p, e in zip(players, exps)]
    starts = [_window_starts(e.lengths, TRACK_CONFIG.bptt_len) for e in exps]
    unrolled = _window_states_many(players[0].spec, [p.params for p in players], inputs, starts)
    for p, e, x, (_, v) in zip(players, exps, inputs, unrolled):
        got = _with_values(e, v)
        for col, n in enumerate(e.lengths.tolist()):
            with torch.no_grad():
                _, ref, _ = P.forward_sequence(p.spec, p.params, x[: n + 1, col], P.initial_state(p.spec, ()))
            torch.testing.assert_close(got.values[:n, col], ref[:n], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(got.final_values[col], ref[n], atol=1e-5, rtol=1e-5)
            assert not got.values[n:, col].any()


def test_only_tracking_players_change():
    gen = torch.Generator().manual_seed(4)
    still, track, rl2 = make_player("mlp", "none"), make_player("mlp", "track"), make_player("rl2", "rl2")
    before = [{k: v.clone() for k, v in q.params.items()} for q in (still, track, rl2)]
    exps = [play_round(q, [12, 8, 5], gen) if q.spec.arch != "rl2" else None for q in (still, track)]
    rl2_exp = exps[0]  # never read: rl2 keeps its parameters
    S.adapt([still, track, rl2], [exps[0], exps[1], rl2_exp])
    assert all(torch.equal(before[0][k], still.params[k]) for k in before[0])
    assert all(torch.equal(before[2][k], rl2.params[k]) for k in before[2])
    assert any(not torch.equal(before[1][k], track.params[k]) for k in before[1])
    # a new game forgets the adaptation
    S.start_game([track])
    assert all(torch.equal(track.theta[k], track.params[k]) for k in before[1]) and track.scratch == {}


@pytest.mark.parametrize("arch", ["mlp", "lstm"])
def test_players_updated_together_get_what_they_get_alone(arch):
    """Two rounds of stacked updates of six players (rounds of different lengths: some share a
    padded shape, some are alone in theirs, one is shorter than the minibatch count) equal, bit for
    bit, each player updated by itself."""
    lengths = [[150, 90, 61], [17, 30, 4], [40, 41, 39], [150, 91, 60], [3, 2, 1], [1, 1, 1]]

    def fresh():
        players = [make_player(arch, seed=i) for i in range(len(lengths))]
        gen = torch.Generator().manual_seed(7)
        return players, [play_round(p, n, gen) for p, n in zip(players, lengths)]

    alone, exps = fresh()
    for _ in range(2):
        for p, e in zip(alone, exps):
            track_update(p, e)
    together, exps = fresh()
    for _ in range(2):
        stats = track_update_many(together, exps)
    for p, q in zip(alone, together):
        assert all(torch.equal(p.params[k], q.params[k]) for k in p.params)
        assert any(not torch.equal(q.params[k], q.theta[k]) for k in q.params)
    samples = [-(-sum(n) // TRACK_CONFIG.bptt_len) if arch == "lstm" else sum(n) for n in lengths]
    assert [s["num_grad_steps"] for s in stats] == [TRACK_CONFIG.epochs * min(TRACK_CONFIG.num_minibatches, n) for n in samples]


def test_stacked_lstm_states_do_not_depend_on_the_group():
    """The window-start states of an agent unrolled alone and among four others are the same bits,
    also where an agent's gates are not a whole number of vector registers (hidden 6, 3 episodes,
    two nets: 144 floats per agent, where a float32 sigmoid over a contiguous run rounds its tail
    differently from the rest)."""
    from sumo_cli.ppo.stacked_ppo import lstm_states

    spec = P.PolicySpec("lstm", D, A, hidden=6)
    params = [P.init_params(spec, torch.Generator().manual_seed(k)) for k in range(5)]
    x = torch.randn(9, 5, 3, spec.input_dim, generator=torch.Generator().manual_seed(9))
    record = {t: [(g, t, t % 3) for g in range(5)] for t in range(9)}
    together, _ = lstm_states(spec, {k: torch.stack([p[k] for p in params]) for k in params[0]}, x, record)
    for g in range(5):
        alone = lstm_states(spec, {k: v[None] for k, v in params[g].items()}, x[:, g:g + 1],
                            {t: [(0, t, t % 3)] for t in range(9)})[0][0]
        for k in alone:
            assert all(torch.equal(a, b) for a, b in zip(alone[k], together[g][k])), k
