"""Pieces of self-play training: schedules, opponent sampling, the sumo VecEnv, learner state."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from sumo_cli.selfplay import selfplay as SP
from sumo_cli.selfplay.sumo_vec import (
    OpponentPolicy, Shaping, StartConditions, SumoVecEnv, torso_distance,
)
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P
from sumo_cli.sim import sumo_env as SE


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def policy_opponent(body: str, arch: str, seed: int, logstd: float = 0.0) -> OpponentPolicy:
    from sumo_cli.sim.bodies import body_spec

    b = body_spec(body)
    spec = P.PolicySpec(arch, b.obs_size, b.n_actions)
    params = P.init_params(spec, torch.Generator().manual_seed(seed))
    params["pi/out/w"] = params["pi/out/w"] * 100  # visible, different actions per opponent
    params["logstd"] = torch.full_like(params["logstd"], logstd)
    g = torch.Generator().manual_seed(seed + 1)
    stats = nz.update(nz.new_stats(b.obs_size), torch.randn(50, b.obs_size, generator=g, dtype=torch.float64))
    return OpponentPolicy(f"{body}-{arch}@{seed}", body, spec.to_dict(), {k: v.numpy() for k, v in params.items()},
                          nz.to_numpy(stats))


# ---------------------------------------------------------------------------------------------
# schedules


def test_reward_annealing_schedule():
    assert SP.reward_alpha(1, 100) == 1.0
    assert SP.reward_alpha(51, 100) == pytest.approx(0.5)
    assert SP.reward_alpha(101, 100) == 0.0 and SP.reward_alpha(500, 100) == 0.0
    alphas = [SP.reward_alpha(k, 10) for k in range(1, 15)]
    assert all(a >= b for a, b in zip(alphas, alphas[1:]))  # never rises
    assert SP.reward_alpha(1, 0) == 0.0  # no annealing: sparse reward only


def test_curriculum_schedules():
    cfg = SP.TrainConfig(start_radius=0.5, start_radius_iterations=10, motionless_iterations=3, motionless_fraction=0.25)
    assert SP.start_radius(1, cfg) == 0.5
    assert SP.start_radius(6, cfg) == pytest.approx(0.5 + 0.65 * 0.5)
    assert SP.start_radius(11, cfg) == pytest.approx(1.15) and SP.start_radius(50, cfg) == pytest.approx(1.15)
    assert SP.start_radius(1, SP.TrainConfig()) is None
    assert [SP.motionless_prob(k, cfg) for k in (1, 3, 4, 9)] == [1.0, 1.0, 0.25, 0.25]


def test_opponent_versions_are_uniform_in_one_to_k():
    rng = np.random.default_rng(0)
    # a stored opponent with versions 1..20, at iteration k = 5: versions 1..5 only, all of them
    draws = SP.sample_opponents(rng, [("bug-lstm", list(range(1, 21)))], 5, 2000)
    versions = np.array([v for _, v in draws])
    assert versions.min() == 1 and versions.max() == 5
    counts = np.bincount(versions, minlength=6)[1:]
    assert counts.min() > 330 and counts.max() < 470  # 400 expected each
    # self-play at iteration k: snapshots theta_0 .. theta_{k-1}, k of them
    k = 4
    draws = SP.sample_opponents(rng, [(SP.SELF, list(range(k + 2)))], k, 400)
    assert {v for _, v in draws} == {0, 1, 2, 3}
    # an agent with only later versions plays its oldest; a pinned one its own
    assert SP.eligible_versions([7, 9], 3) == [7]
    assert SP.eligible_versions([1], 300) == [1]
    # two agents: each picked about half of the time
    draws = SP.sample_opponents(rng, [("a", [1, 2]), ("b", [1])], 10, 1000)
    assert 400 < sum(n == "a" for n, _ in draws) < 600


def test_opponent_stride_meets_a_longer_pool_at_the_same_share_of_its_history():
    rng = np.random.default_rng(1)
    # a 60-iteration learner against a 300-version pool agent with stride 5: at k = 6, versions 1..30
    draws = SP.sample_opponents(rng, [("pool", list(range(1, 301)))], 6, 3000, stride=5.0)
    versions = {v for _, v in draws}
    assert versions == set(range(1, 31))
    # the own snapshots are never strided (version k does not exist yet)
    draws = SP.sample_opponents(rng, [(SP.SELF, list(range(10)))], 4, 400, stride=5.0)
    assert {v for _, v in draws} == {0, 1, 2, 3}
    assert SP.TrainConfig(opponent_stride=0.5).check() == ["opponent-stride must be at least 1, got 0.5"]


def test_plan_draws_self_play_snapshots_up_to_the_current_one():
    cfg = SP.TrainConfig(body="ant", arch="mlp", n_envs=4, num_steps=8, opponent_samples=16)
    learner = SP.PPOLearner(SP.policy_spec(cfg), cfg)
    store = SP.MemoryStore("ant")
    store.start(learner)
    for k in (1, 2, 3):
        jobs = SP.plan_jobs(cfg, k, store.pool(), store)
        assert len(jobs) == cfg.rollout_shards and sum(j.n_envs for j in jobs) == 4
        keys = {o.key for j in jobs for o in j.opponents}
        assert keys <= {f"self@{v}" for v in range(k)}
        assert jobs[0].alpha == SP.reward_alpha(k, cfg.anneal_iterations)
        assert jobs[0].env_seed != jobs[1].env_seed
        store.snapshots[k] = dataclasses.replace(store.snapshots[0], key=f"self@{k}")  # as if iteration k stored it
    assert keys == {"self@0", "self@1", "self@2"}
    # the plan is a function of (seed, iteration): planning again draws the same opponents
    again = SP.plan_jobs(cfg, 3, store.pool(), store)
    assert [o.key for o in again[0].opponents] == [o.key for o in jobs[0].opponents]


def test_a_spider_is_never_a_motionless_opponent():
    """A motionless Spider sags below the fall line by itself: while motionless opponents are on, the
    shards of standing bodies play motionless ones, the Spider shards play their agents."""
    cfg = SP.TrainConfig(body="spider", arch="mlp", n_envs=4, num_steps=8, rollout_shards=2, opponent_samples=4,
                         opponents=["self", "ant-x"], motionless_iterations=2, motionless_fraction=0.5)
    learner = SP.PPOLearner(SP.policy_spec(cfg), cfg)
    ant_learner = SP.PPOLearner(SP.policy_spec(SP.TrainConfig(body="ant", arch="mlp")), cfg)
    ant = SP.snapshot_opponent(ant_learner, "ant", "ant-x@1")
    store = SP.MemoryStore("spider", {"ant-x": [ant]})
    store.start(learner)
    for k, p_ant in ((1, 1.0), (3, 0.5)):
        by_body = {j.opp_body: j for j in SP.plan_jobs(cfg, k, store.pool(), store)}
        assert (by_body["ant"].motionless_prob, by_body["spider"].motionless_prob) == (p_ant, 0.0)
        assert by_body["spider"].opponents and all(o.key.startswith("self@") for o in by_body["spider"].opponents)
        assert bool(by_body["ant"].opponents) == (p_ant < 1.0)


def test_shards_follow_opponent_bodies():
    cfg = SP.TrainConfig(n_envs=8, rollout_shards=2)
    assert [(s.opp_body, s.n_envs) for s in SP.shard_layout(cfg, ["ant"])] == [("ant", 4), ("ant", 4)]
    assert [(s.opp_body, s.n_envs) for s in SP.shard_layout(cfg, ["ant", "bug", "spider"])] == [
        ("ant", 3), ("bug", 3), ("spider", 2)]
    with pytest.raises(ValueError):
        SP.shard_layout(SP.TrainConfig(n_envs=2, rollout_shards=1), ["ant", "bug", "spider"])


def test_config_round_trip_and_checks():
    cfg = SP.TrainConfig(body="bug", strategy="rl2", start_radius=0.6, opponents=["self", "ant-lstm@3"])
    assert SP.TrainConfig.from_dict(cfg.to_dict()) == cfg
    assert cfg.policy_arch == "rl2" and cfg.interaction_episodes == 3
    assert cfg.ppo().num_minibatches == 8 and SP.TrainConfig(arch="mlp").ppo().num_minibatches == 8
    assert SP.TrainConfig(arch="mlp", num_minibatches=0).ppo().num_minibatches == 32  # runs stored before
    assert SP.TrainConfig(iterations=0).check()[0].startswith("iterations must be at least 1")
    assert "motionless-fraction" in SP.TrainConfig(motionless_fraction=2).check()[0]


# ---------------------------------------------------------------------------------------------
# the sumo VecEnv


def test_reward_mixes_shaped_dense_and_sparse_and_keeps_termination_apart():
    """Zero actions against a motionless opponent: every bout runs to the 501-step limit, which is
    a truncation (a draw) -- not a termination; random actions walk off: terminations."""
    shaping = Shaping(control=0.3, push=5.0, move=2.0)
    env = SumoVecEnv("ant", "ant", 2, [], physics="fast", motionless_prob=1.0, shaping=shaping, alpha=0.25)
    env.reset(seed=1)
    sim = env.sim
    total = np.zeros(2)
    for t in range(SE.MAX_STEPS + 1):
        out = env.step(np.zeros((2, 8)))
        total += out.reward
        if t < SE.MAX_STEPS:
            assert not out.done.any()
    assert out.truncated.all() and not out.terminated.any()
    assert [e.length for e in env.episodes] == [501, 501]
    assert all(e.outcome == SE.DRAW for e in env.episodes)
    assert total == pytest.approx([e.train_return for e in env.episodes])
    assert all(e.faithful_return < -1000 for e in env.episodes)  # the draw penalty + the push cost
    sim.close()

    env = SumoVecEnv("ant", "ant", 4, [], physics="fast", motionless_prob=1.0, alpha=0.0)
    env.reset(seed=2)
    rng = np.random.default_rng(0)
    ends = []
    for _ in range(300):
        out = env.step(rng.uniform(-1, 1, (4, 8)))
        assert not out.reward[~out.done].any()  # alpha = 0: no dense reward at all
        if out.done.any():
            ends.append((out.terminated[out.done], out.truncated[out.done], out.reward[out.done]))
    assert ends, "random actions should end some bouts"
    for term, trunc, rew in ends:
        assert term.all() and not trunc.any()
        assert set(np.round(rew).tolist()) <= {2000.0, -2000.0, -1000.0}  # alpha = 0: the sparse reward only
    env.close()


def test_shaping_rescales_the_reference_terms():
    env = SumoVecEnv("ant", "ant", 3, [], physics="fast", motionless_prob=1.0)
    env.reset(seed=0)
    res = env.sim.step(np.random.default_rng(1).uniform(-1, 1, (3, 8)), np.zeros((3, 8)))
    assert Shaping().dense(res) == pytest.approx(res.dense_a)
    d = Shaping(control=0.2, push=0.0, move=1.0, centre=0.5).dense(res)
    xy = res.final_obs_a[:, :2]
    assert d == pytest.approx(2 * res.control_a + 10 * res.move_a - 0.5 * np.hypot(xy[:, 0], xy[:, 1]))
    before = np.array([2.0, 2.3, 2.6])
    obs_before = np.zeros_like(res.final_obs_a)  # own torso at the centre, the opponent's `before` away along x
    obs_before[:, -13] = before
    d = Shaping(control=0.0, push=0.0, move=0.0, approach=2.0).dense(res, obs_before)
    assert d == pytest.approx(2.0 * (before - torso_distance(res.final_obs_a)) / SE.DT)
    env.close()


def test_batched_opponents_match_one_by_one():
    """Three opponents (two LSTMs, one MLP, plus motionless columns) act in one call per
    architecture; each column's action equals that opponent evaluated alone."""
    opps = [policy_opponent("bug", "lstm", 1, -30.0), policy_opponent("bug", "lstm", 2, -30.0),
            policy_opponent("bug", "mlp", 3, -30.0)]
    env = SumoVecEnv("ant", "bug", 6, opps, physics="fast", motionless_prob=0.2)
    env.reset(seed=4)
    env.assign[:] = [0, 1, 2, 0, -1, 1]
    env._groups = None
    states = {c: P.initial_state(P.PolicySpec.from_dict(opps[k].spec), 1) for c, k in enumerate(env.assign) if k >= 0}
    rng = np.random.default_rng(3)
    for _ in range(5):
        obs_b = env._obs_b.copy()
        act = env._opponent_actions(obs_b)
        for c, k in enumerate(env.assign):
            if k < 0:
                assert not act[c].any()
                continue
            spec = P.PolicySpec.from_dict(opps[k].spec)
            params = {n: torch.as_tensor(v) for n, v in opps[k].params.items()}
            x = nz.normalize(nz.to_torch(opps[k].obs_stats), torch.as_tensor(obs_b[c:c + 1], dtype=torch.float32))
            mean, _, states[c] = P.forward(spec, params, x, states[c])
            np.testing.assert_allclose(act[c], mean[0].numpy(), rtol=1e-4, atol=1e-5)
        res = env.sim.step(rng.uniform(-1, 1, (6, 8)), act)
        assert not res.done.any()
        env._obs_b = res.obs_b
    env.close()


def test_opponent_actions_are_the_nets_plus_one_batched_sample_per_architecture():
    """RL^2, an LSTM with policy-side features, an MLP and two of one LSTM, at full noise: every
    column's action is its opponent's net (torch, the RL^2 inputs and the recurrent state carried)
    plus the noise of one ``P.sample`` over each architecture's columns in column order, drawn from
    the env's generator in order of each architecture's first column."""
    from sumo_cli.nets import features as F
    from sumo_cli.sim.bodies import body_spec

    b = body_spec("bug")
    opps = [policy_opponent("bug", "rl2", 1), policy_opponent("bug", "lstm", 2), policy_opponent("bug", "mlp", 3)]
    ego = P.PolicySpec("lstm", F.policy_dim("ego", b.obs_size), b.n_actions, features="ego")
    params = P.init_params(ego, torch.Generator().manual_seed(4))
    stats = nz.update(nz.new_stats(ego.obs_dim), torch.randn(50, ego.obs_dim, generator=torch.Generator().manual_seed(5),
                                                             dtype=torch.float64))
    opps.append(OpponentPolicy("bug-ego@4", "bug", ego.to_dict(), {k: v.numpy() for k, v in params.items()},
                               nz.to_numpy(stats)))
    env = SumoVecEnv("ant", "bug", 7, opps, physics="fast")
    env.reset(seed=6)
    env.assign[:] = [2, 0, 1, 3, 1, -1, 2]
    env._groups = None
    specs = [P.PolicySpec.from_dict(o.spec) for o in opps]
    states = {c: P.initial_state(specs[k], 1) for c, k in enumerate(env.assign) if k >= 0}
    played = []
    sim_step = env.sim.step
    env.sim.step = lambda a, b_act: played.append(b_act) or sim_step(a, b_act)
    rng = np.random.default_rng(7)
    for _ in range(4):
        obs_b, prev_r, prev_d = env._obs_b.copy(), env._opp_prev_r.copy(), env._opp_prev_d.copy()
        gen = torch.Generator()
        gen.set_state(env._gen.get_state())
        out = env.step(rng.uniform(-1, 1, (7, 8)))
        assert not out.done.any()
        act = played[-1]
        means = {}
        for c, k in enumerate(env.assign):
            if k < 0:
                continue
            o, spec = opps[k], specs[k]
            x = nz.normalize(nz.to_torch(o.obs_stats), torch.as_tensor(F.augment(spec.features, obs_b[c:c + 1]), dtype=torch.float32))
            if spec.arch == "rl2":
                x = P.rl2_input(x, torch.as_tensor(prev_r[c:c + 1]), torch.as_tensor(prev_d[c:c + 1]))
            means[c], _, states[c] = P.forward(spec, {n: torch.as_tensor(v) for n, v in o.params.items()}, x, states[c])
        order = {}
        for c, k in enumerate(env.assign):
            if k >= 0:
                order.setdefault(specs[k], []).append(c)
        for spec, cols in order.items():
            noise = torch.randn((len(cols), 1, b.n_actions), generator=gen, dtype=torch.float32)[:, 0]
            for c, z in zip(cols, noise):
                logstd = torch.as_tensor(opps[env.assign[c]].params["logstd"])
                np.testing.assert_allclose(act[c], (means[c][0] + torch.exp(logstd) * z).numpy(), rtol=1e-4, atol=1e-5)
        assert not act[5].any()
    assert prev_r.any()  # the RL^2 opponent was given its rewards
    env.close()


def test_opponents_are_redrawn_per_interaction_and_rl2_is_told():
    opps = [policy_opponent("ant", "mlp", s) for s in range(3)]
    env = SumoVecEnv("ant", "ant", 4, opps, physics="fast", episodes_per_opponent=2)
    env.reset(seed=5)
    rng = np.random.default_rng(0)
    changed = done = 0
    for _ in range(400):
        out = env.step(rng.uniform(-1, 1, (4, 8)))
        done += int(out.done.sum())
        changed += int(out.info["task_changed"].sum())
        assert not (out.info["task_changed"] & ~out.done).any()  # only at bout ends
    assert done >= 6 and done // 2 - 4 <= changed <= done // 2 + 4
    assert {e.opponent for e in env.episodes} <= {o.key for o in opps}
    env.close()


@pytest.mark.parametrize("radius,face", [(0.5, False), (0.8, True)])
def test_start_conditions(radius, face):
    env = SumoVecEnv("ant", "ant", 8, [], physics="fast", motionless_prob=1.0, start=StartConditions(radius, face))
    obs = env.reset(seed=3)
    d = torso_distance(obs)
    assert np.all(np.abs(d - 2 * radius) < 0.3), d
    # yaw of A's torso: toward B when facing, near 0 (identity + noise) otherwise
    w, z = obs[:, 3], obs[:, 6]
    yaw = 2 * np.arctan2(z, w)
    to_b = np.arctan2(obs[:, -12] - obs[:, 1], obs[:, -13] - obs[:, 0])
    err = np.angle(np.exp(1j * (yaw - to_b)))
    if face:
        assert np.all(np.abs(err) < 0.3), err
    else:
        assert np.all(np.abs(yaw) < 0.3)
    env.close()
    ref = SumoVecEnv("ant", "ant", 8, [], physics="fast", motionless_prob=1.0)
    plain = SE.BatchedSumo("ant", "ant", 8, physics="fast", seed=3)
    np.testing.assert_array_equal(ref.reset(seed=3), plain.reset(seed=3)[0])  # reference start: unchanged
    ref.close()
    plain.close()


def _heading_errors(obs):
    yaw = 2 * np.arctan2(obs[:, 6], obs[:, 3])
    to_b = np.arctan2(obs[:, -12] - obs[:, 1], obs[:, -13] - obs[:, 0])
    return np.angle(np.exp(1j * (yaw - to_b)))


def test_face_error_spreads_the_start_heading_within_its_bound():
    n = 64
    env = SumoVecEnv("ant", "ant", n, [], physics="fast", motionless_prob=1.0,
                     start=StartConditions(None, True, 1.0))
    err = _heading_errors(env.reset(seed=3))
    assert np.all(np.abs(err) < 1.0 + 0.3), err  # the bound + the reference start's noise (as above)
    assert err.std() > 0.4  # spread (uniform on [-1, 1] has std 0.58), not all facing
    env.close()


def test_face_spread_schedule_ends_at_the_reference_start():
    cfg = SP.TrainConfig(face_opponent=True, face_spread_iterations=10)
    assert SP.start_conditions(1, cfg) == StartConditions(None, True, 0.0)
    assert SP.start_conditions(6, cfg).face_error == pytest.approx(np.pi / 2)
    assert SP.start_conditions(11, cfg).is_reference
    assert SP.start_conditions(3, SP.TrainConfig(face_opponent=True)) == StartConditions(None, True, 0.0)
    assert SP.TrainConfig(face_spread_iterations=5).check() == ["face-spread-iterations needs --face-opponent"]


# ---------------------------------------------------------------------------------------------
# the learner


@pytest.mark.parametrize("arch", ["mlp", "lstm"])
def test_learner_state_round_trip_continues_identically(arch):
    cfg = SP.TrainConfig(body="ant", arch=arch, n_envs=2, num_steps=20, epochs=2, num_minibatches=2, physics="fast")
    spec = SP.policy_spec(cfg)
    store = SP.MemoryStore("ant")
    a = SP.PPOLearner(spec, cfg)
    store.start(a)
    from sumo_cli.runtime.executor import InlineExecutor

    ex = InlineExecutor()
    SP.train(dataclasses.replace(cfg, iterations=1), a, store, ex)
    tensors, meta = a.state()
    b = SP.PPOLearner(spec, cfg)
    b.load_state({k: v.clone() for k, v in tensors.items()}, meta)
    for k, v in b.state()[0].items():
        assert torch.equal(v, tensors[k]), k
    # one more iteration from either gives bit-identical parameters (Adam moments and steps restored)
    store_b = SP.MemoryStore("ant")
    store_b.snapshots = dict(store.snapshots)
    cfg2 = dataclasses.replace(cfg, iterations=2)
    SP.train(cfg2, a, store, ex, start=1)
    SP.train(cfg2, b, store_b, ex, start=1)
    for k in a.params:
        assert torch.equal(a.params[k], b.params[k]), k
    for key in ("mean_return", "policy_loss", "value_loss", "opponents", "episodes"):
        assert store.metrics[-1][key] == store_b.metrics[-1][key], key


def test_push_out_term_and_before_values_across_auto_resets():
    """push_out rewards the opponent's outward speed; the approach and push-out terms of every step,
    the first step of a new bout included, use the pose the step started from (after an automatic
    reset: the new bout's start, not the last bout's final pose)."""
    from sumo_cli.selfplay.sumo_vec import opponent_radius

    shaping = Shaping(control=0.0, push=0.0, move=0.0, approach=1.5, push_out=2.0)
    env = SumoVecEnv("ant", "ant", 4, [], physics="fast", motionless_prob=1.0, alpha=1.0, shaping=shaping)
    obs = env.reset(seed=4)
    d = env.sim._slots[0][0]  # the opponent's torso in the observation is where the physics has it
    assert opponent_radius(obs)[0] == pytest.approx(np.hypot(*d.qpos[env.sim.b.qpos_start:env.sim.b.qpos_start + 2]))
    rng = np.random.default_rng(5)
    restarts = 0
    for _ in range(200):
        out = env.step(rng.uniform(-1, 1, (4, 8)))
        expect = (1.5 * (torso_distance(obs) - torso_distance(out.final_obs))
                  + 2.0 * (opponent_radius(out.final_obs) - opponent_radius(obs))) / SE.DT
        live = ~out.truncated  # an unstable bout is truncated and earns no shaping
        assert out.reward[live] == pytest.approx(expect[live], abs=1e-6)
        restarts += int(out.done.sum())
        obs = out.obs
    assert restarts > 0, "random actions should end some bouts within 200 steps"
    env.close()


def test_anneal_start_scales_the_schedule():
    assert SP.reward_alpha(1, 100, 0.8) == pytest.approx(0.8)
    assert SP.reward_alpha(51, 100, 0.8) == pytest.approx(0.4)
    assert SP.reward_alpha(101, 100, 0.8) == 0.0
    assert SP.TrainConfig(anneal_start=1.5).check() == ["anneal-start must be in [0, 1], got 1.5"]


def test_torch_threads_gives_the_count_back_even_after_an_error():
    from sumo_cli.runtime.threads import torch_threads

    before = torch.get_num_threads()
    with pytest.raises(KeyboardInterrupt):
        with torch_threads(1):
            assert torch.get_num_threads() == 1
            raise KeyboardInterrupt
    assert torch.get_num_threads() == before


def test_tilt_term_rewards_the_change_of_the_tilt_balance():
    """tilt pays the rate at which the opponent's torso tips over relative to the agent's own: its
    steps sum to tilt * (final balance - start balance) / dt, whatever happened in between."""
    from sumo_cli.selfplay.sumo_vec import tilt_balance

    shaping = Shaping(control=0.0, push=0.0, move=0.0, tilt=3.0)
    env = SumoVecEnv("ant", "ant", 4, [], physics="fast", motionless_prob=1.0, alpha=1.0, shaping=shaping)
    obs = env.reset(seed=2)
    assert np.abs(tilt_balance(obs)).max() < 0.02  # both nearly upright at the start (the reset jitters the pose)
    rng = np.random.default_rng(3)
    for _ in range(60):
        out = env.step(rng.uniform(-1, 1, (4, 8)))
        expect = 3.0 * (tilt_balance(out.final_obs) - tilt_balance(obs)) / SE.DT
        live = ~out.truncated
        assert out.reward[live] == pytest.approx(expect[live], abs=1e-6)
        obs = out.obs
    env.close()


def test_tilt_balance_reads_both_torsos():
    from sumo_cli.selfplay.sumo_vec import tilt_balance

    obs = np.zeros((2, 40))
    obs[:, 3] = 1.0  # own torso upright
    obs[:, -10] = 1.0  # opponent upright
    obs[1, -10:-6] = [np.cos(np.pi / 4), np.sin(np.pi / 4), 0.0, 0.0]  # opponent rolled 90 degrees
    assert tilt_balance(obs) == pytest.approx([0.0, 1.0])
    obs[1, 3:7] = [0.0, 1.0, 0.0, 0.0]  # own torso upside down
    assert tilt_balance(obs) == pytest.approx([0.0, -1.0])
