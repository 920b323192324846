"""Policy-side observation features (sumo_cli.nets.features): geometry facts, and that a policy
with features plays and trains through every path while the environment's observation stays the
original one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sumo_cli.nets import features as F
from sumo_cli.nets import policy as P


def _obs(own_xy, own_yaw, opp_xy, opp_yaw, dim=120) -> np.ndarray:
    """An Ant observation with only the torso poses filled in (quaternion of a yaw rotation)."""
    o = np.zeros(dim)
    o[0:2] = own_xy
    o[3:7] = [math.cos(own_yaw / 2), 0.0, 0.0, math.sin(own_yaw / 2)]
    o[-13:-11] = opp_xy
    o[-10:-6] = [math.cos(opp_yaw / 2), 0.0, 0.0, math.sin(opp_yaw / 2)]
    return o


def test_ego_opponent_straight_ahead_and_to_the_left():
    # Facing +y from (0, -1): the opponent at (0, 1) is 2 m straight ahead.
    e = F.ego(_obs([0.0, -1.0], math.pi / 2, [0.0, 1.0], -math.pi / 2))
    np.testing.assert_allclose(e[0:2], [2.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(e[2:4], [1.0, 0.0], atol=1e-12)
    assert e[4] == pytest.approx(2.0)
    np.testing.assert_allclose(e[5:7], [1.0, 0.0], atol=1e-12)  # the centre is 1 m ahead
    np.testing.assert_allclose(e[7:9], [1.0, 0.0], atol=1e-12)  # the opponent is 1 m beyond the centre
    assert e[9] == pytest.approx(1.1) and e[10] == pytest.approx(1.1)  # margins to the 2.1 ring-out
    np.testing.assert_allclose(e[11:13], [-1.0, 0.0], atol=1e-12)  # it faces the other way
    # Facing +x from the centre: an opponent at (0, 1) is to the left (positive local y).
    e = F.ego(_obs([0.0, 0.0], 0.0, [0.0, 1.0], 0.0))
    np.testing.assert_allclose(e[0:2], [0.0, 1.0], atol=1e-12)


def test_ego_is_invariant_to_rotating_the_whole_bout():
    rng = np.random.default_rng(0)
    own, opp = rng.uniform(-1.5, 1.5, 2), rng.uniform(-1.5, 1.5, 2)
    yaw_a, yaw_b = rng.uniform(-math.pi, math.pi, 2)
    base = F.ego(_obs(own, yaw_a, opp, yaw_b))
    for turn in (0.7, math.pi / 2, -2.0):
        c, s = math.cos(turn), math.sin(turn)
        R = np.array([[c, -s], [s, c]])
        turned = F.ego(_obs(R @ own, yaw_a + turn, R @ opp, yaw_b + turn))
        # everything but the ring-out margins (the tatami is square, not round) is unchanged
        keep = [0, 1, 2, 3, 4, 5, 6, 7, 8, 11, 12]
        np.testing.assert_allclose(turned[keep], base[keep], atol=1e-9)


def test_augment_keeps_the_original_numbers_first_and_batches():
    obs = np.random.default_rng(1).normal(size=(3, 5, 120)).astype(np.float32)
    out = F.augment(F.EGO, obs)
    assert out.shape == (3, 5, 133) and out.dtype == np.float32
    np.testing.assert_array_equal(out[..., :120], obs)
    np.testing.assert_allclose(out[1, 2, 120:], F.ego(obs[1, 2].astype(np.float64)), rtol=1e-5, atol=1e-5)
    assert F.augment(F.NONE, obs) is obs
    with pytest.raises(ValueError, match="unknown observation features"):
        F.augment("egocentric", obs)


def test_past_features_are_the_last_two_changes_and_restart_with_each_bout():
    rng = np.random.default_rng(2)
    o = rng.normal(size=(4, 3, 120))  # 4 steps of 3 streams
    v = F.Viewer(F.EGO_PAST, 3)
    assert F.policy_dim(F.EGO_PAST, 120) == 120 + 13 + 240 and F.env_dim(F.EGO_PAST, 373) == 120
    first = v.view(o[0])
    assert first.shape == (3, 373)
    np.testing.assert_array_equal(first[:, :133], F.augment(F.EGO, o[0]))
    assert not first[:, 133:].any()  # a bout's first step: the past is the present
    second = v.view(o[1])
    np.testing.assert_allclose(second[:, 133:253], o[1] - o[0])
    assert not second[:, 253:].any()
    # looking (record=False) leaves the streams as they were
    np.testing.assert_allclose(v.view(o[3], record=False)[:, 133:253], o[3] - o[1])
    third = v.view(o[2])
    np.testing.assert_allclose(third[:, 133:253], o[2] - o[1])
    np.testing.assert_allclose(third[:, 253:], o[1] - o[0])
    # stream 1's bout starts anew; streams 0 and 2 go on; rows view a subset of streams
    v.restart([1])
    fourth = v.view(o[3][[0, 1]], rows=[0, 1])
    np.testing.assert_allclose(fourth[0, 133:253], o[3, 0] - o[2, 0])
    assert not fourth[1, 133:].any()
    np.testing.assert_allclose(v.view(o[3][[2]], rows=[2])[0, 253:], o[2, 2] - o[1, 2])
    with pytest.raises(ValueError, match="Viewer"):
        F.augment(F.EGO_PAST, o[0])
    with pytest.raises(ValueError, match="no observation"):
        F.env_dim(F.EGO_PAST, 374)


def test_the_learners_past_restarts_with_each_bout_and_its_final_view_keeps_the_ended_one():
    from sumo_cli.selfplay.sumo_vec import SumoVecEnv

    env = SumoVecEnv("ant", "ant", 4, [], physics="fast", motionless_prob=1.0, features=F.EGO_PAST)
    rng = np.random.default_rng(0)
    try:
        obs = env.reset(seed=1)
        assert obs.shape == (4, 373) and not obs[:, 133:].any()
        ended = 0
        for _ in range(502):  # every bout ends by its 501st step
            out = env.step(rng.uniform(-1, 1, (4, 8)))
            done = out.terminated | out.truncated
            np.testing.assert_allclose(out.final_obs[:, 133:253], out.final_obs[:, :120] - obs[:, :120], atol=1e-5)
            np.testing.assert_allclose(out.obs[~done, 133:253], out.obs[~done, :120] - obs[~done, :120], atol=1e-5)
            assert not out.obs[done, 133:].any()  # the next bout starts without a past
            ended += int(done.sum())
            obs = out.obs
            if ended >= 4:
                break
        assert ended >= 4
    finally:
        env.close()


def test_policy_spec_round_trips_features_and_old_dicts_mean_none():
    spec = P.PolicySpec("mlp", 133, 8, features="ego")
    assert spec.env_obs_dim == 120
    assert P.PolicySpec.from_dict(spec.to_dict()) == spec
    plain = P.PolicySpec("mlp", 120, 8)
    assert "features" not in plain.to_dict()  # checkpoints written before features stay the same
    assert P.PolicySpec.from_dict({"arch": "mlp", "obs_dim": 120, "act_dim": 8}).features == "none"
    with pytest.raises(ValueError):
        P.PolicySpec("mlp", 10, 8, features="ego")


@pytest.mark.parametrize("features", [F.EGO, F.EGO_PAST])
def test_ego_policy_trains_and_plays_against_a_plain_one(features):
    """Two ego (or ego-past) iterations train through the rollout path (self-play, so the snapshots it plays are
    ego opponents), and a bout between the ego policy and a plain one goes through the compete
    path with each seeing its own view."""
    from sumo_cli.compete.bouts import play_bouts
    from sumo_cli.compete.game import AgentData
    from sumo_cli.selfplay import selfplay as SP
    from sumo_cli.runtime.executor import make_executor

    cfg = SP.TrainConfig(body="ant", arch="mlp", features=features, physics="fast", n_envs=4, num_steps=32,
                         iterations=2, seed=3)
    spec = SP.policy_spec(cfg)
    dim = F.policy_dim(features, 120)
    assert spec.features == features and spec.obs_dim == dim
    learner = SP.PPOLearner(spec, cfg)
    store = SP.MemoryStore("ant")
    store.start(learner)
    executor = make_executor(1)
    try:
        SP.train(cfg, learner, store, executor)
    finally:
        executor.close()
    snap = store.snapshots[2]
    assert snap.spec["features"] == features and tuple(snap.obs_stats["sum"].shape) == (dim,)
    assert snap.obs_stats["count"] > 0

    def agent(s, name):  # noqa: ANN001
        return AgentData(name, 1, "ant", "none", s.spec, s.params, s.obs_stats)

    plain_learner = SP.PPOLearner(SP.policy_spec(SP.TrainConfig(body="ant", arch="mlp")), cfg)
    plain = SP.snapshot_opponent(plain_learner, "ant", "plain")
    bouts = play_bouts(agent(snap, "ego"), agent(plain, "plain"), n=2, seed=5, physics="fast")
    assert len(bouts) == 2 and all(b.outcome in ("win", "loss", "draw") for b in bouts)
    # an iterated game in which the ego agent adapts by PPO tracking: its stored round experience
    # (observations and the final observation of each bout) is in its own view
    from sumo_cli.compete.game import GameSettings, play_game

    tracker = AgentData("ego-track", 2, "ant", "track", snap.spec, snap.params, snap.obs_stats)
    result = play_game(tracker, agent(plain, "plain"), GameSettings(rounds=2, episodes=2, physics="fast"), seed=2)
    assert len(result.rounds) == 2
