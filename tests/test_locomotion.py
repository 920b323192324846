"""The nonstationary locomotion env (sumo_cli.sim.locomotion): pairs, torque-factor schedule,
reward, observation layout, auto-reset, determinism."""

import itertools

import mujoco
import numpy as np
import pytest

from sumo_cli.sim import locomotion as L


def test_pairs_and_split():
    assert len(L.PAIRS) == 15 and set(L.PAIRS) == set(itertools.combinations(range(6), 2))
    assert len(L.TRAIN_PAIRS) == 12 and len(set(L.TRAIN_PAIRS)) == 12
    test = set(L.TEST_PAIRS.values())
    assert len(test) == 3 and not test & set(L.TRAIN_PAIRS)
    assert test | set(L.TRAIN_PAIRS) == set(L.PAIRS)
    assert L.TEST_PAIRS == {"back": (4, 5), "middle": (2, 3), "front": (0, 1)}


def test_front_middle_back_by_leg_position_along_y():
    """Front legs' feet lie furthest along the rewarded +y direction, back legs' least."""
    m = L.build_model()
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    torso_y = d.body("bug/torso").xpos[1]
    foot_y = {}
    for i in range(6):
        shin = m.geom(f"bug/shin_{i + 1}_geom")
        foot_y[i] = d.geom_xpos[shin.id][1] - torso_y   # centre of the shin capsule
    ys = {k: [foot_y[i] for i in p] for k, p in L.TEST_PAIRS.items()}
    assert min(ys["front"]) > 0.3 and max(ys["back"]) < -0.3
    assert all(abs(y) < 1e-9 for y in ys["middle"])
    assert min(ys["front"]) > max(ys["middle"]) > max(ys["back"])


def test_factor_schedule_and_paralysis():
    assert L.factor(1) == 1.0 and L.factor(7) == 0.0
    assert np.allclose(L.factor(np.arange(1, 8)), 1 - np.arange(7) / 6)
    horizon = 3
    env = L.LocomotionEnv(2, pairs=[(4, 5), (0, 2)], horizon=horizon, seed=0, n_threads=1)
    env.reset(0)
    act = np.full((2, 12), 0.7)
    for k in range(1, 8):
        for t in range(horizon):
            assert np.all(env.episode == k)
            out = env.step(act)
            assert np.all(out.info["episode_in_sequence"] == k)
            assert np.allclose(out.info["factor"], 1 - (k - 1) / 6)
            for n, pair in enumerate([(4, 5), (0, 2)]):
                d = env.data[n] if t < horizon - 1 else None
                if d is None:
                    continue   # the last step of an episode resets the physics
                cols = [2 * i + j for i in pair for j in (0, 1)]
                others = [c for c in range(12) if c not in cols]
                f = L.factor(k)
                assert np.allclose(d.actuator_force[cols], 0.7 * f)       # actuator space (before gear)
                assert np.allclose(d.actuator_force[others], 0.7)
                assert np.allclose(d.qfrc_actuator[6 + np.array(others)], 150 * 0.7)
                assert np.allclose(d.qfrc_actuator[6 + np.array(cols)], 150 * 0.7 * f)
                if k == 7:
                    assert np.all(d.actuator_force[cols] == 0) and np.all(d.qfrc_actuator[6 + np.array(cols)] == 0)
        assert out.truncated.all()
        assert out.info["task_changed"].all() == (k == 7)
    assert np.all(env.episode == 1)           # a new sequence
    assert env.pairs == [(4, 5), (0, 2)]      # without resample_pairs an env keeps its pair


def test_reward_is_forward_velocity_minus_control_cost():
    env = L.LocomotionEnv(3, horizon=50, seed=1, n_threads=1)
    obs = env.reset(1)
    rng = np.random.default_rng(0)
    for t in range(20):
        a = rng.uniform(-1.5, 1.5, (3, 12))   # clipped to [-1, 1] by the env
        out = env.step(a)
        ca = np.clip(a, -1, 1)
        expect = (out.obs[:, 1] - obs[:, 1]) / L.DT - L.CTRL_COST * (ca ** 2).sum(1)
        assert np.allclose(out.reward, expect, atol=1e-12)
        obs = out.obs


def test_observation_layout():
    env = L.LocomotionEnv(2, horizon=10, seed=0, n_threads=1)
    obs = env.reset(0)
    assert env.obs_dim == 37 == 19 + 18 and env.act_dim == 12 and obs.shape == (2, 37)
    assert np.allclose(obs[:, :3], [0, 0, L.START_Z]) and np.allclose(obs[:, 3:7], [1, 0, 0, 0])
    out = env.step(np.random.default_rng(0).uniform(-1, 1, (2, 12)))
    for n in range(2):
        d = env.data[n]
        assert np.array_equal(out.obs[n], np.concatenate([d.qpos, d.qvel]))
        assert np.isclose(np.linalg.norm(out.obs[n, 3:7]), 1.0)
    # joint order: hip_1, knee_1, ..., hip_6, knee_6 right after the free joint
    m = env.model
    for k in range(12):
        j = m.joint(f"bug/{'hip' if k % 2 == 0 else 'knee'}_{k // 2 + 1}")
        assert j.qposadr[0] == 7 + k and j.dofadr[0] == 6 + k


def test_auto_reset_and_determinism():
    def run(n_threads, seed=3):
        env = L.LocomotionEnv(4, horizon=5, seed=seed, n_threads=n_threads, resample_pairs=True)
        obs = [env.reset(seed)]
        rng = np.random.default_rng(seed)
        rews, pairs = [], []
        for t in range(7 * 5 + 5):
            out = env.step(rng.uniform(-1, 1, (4, 12)))
            rews.append(out.reward)
            obs.append(out.obs)
            pairs.append(out.info["pair_index"])
            if (t + 1) % 5 == 0:
                assert out.truncated.all() and not out.terminated.any()
                assert np.allclose(out.obs[:, :3], [0, 0, L.START_Z])        # reset
                assert not np.allclose(out.final_obs[:, :3], [0, 0, L.START_Z])
                assert out.info["task_changed"].all() == ((t + 1) == 35)
            else:
                assert not out.truncated.any() and np.array_equal(out.obs, out.final_obs)
        env.close()
        return np.array(rews), np.array(obs), np.array(pairs)

    r1, o1, p1 = run(1)
    r2, o2, p2 = run(2)
    assert np.array_equal(r1, r2) and np.array_equal(o1, o2) and np.array_equal(p1, p2)
    train = {L.pair_index(p) for p in L.TRAIN_PAIRS}
    assert set(p1.ravel()) <= train
    r3, _, _ = run(1, seed=4)
    assert not np.array_equal(r1, r3)


def test_bad_actions_shape():
    env = L.LocomotionEnv(2, n_threads=1)
    with pytest.raises(ValueError):
        env.step(np.zeros((2, 11)))


def test_unstable_physics_keeps_episode_length(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)         # MuJoCo writes its warning to MUJOCO_LOG.TXT in the cwd
    env = L.LocomotionEnv(2, horizon=4, seed=0, n_threads=1)
    env.reset(0)
    env.step(np.zeros((2, 12)))
    env.data[1].qvel[:] = 1e12          # blows up on the next step
    out = env.step(np.zeros((2, 12)))
    assert env.unstable_count >= 1 and np.isfinite(out.obs).all() and np.isfinite(out.reward).all()
    assert abs(out.reward[1]) < 1e-9 and env.t[1] == 2
    env.step(np.zeros((2, 12)))
    out = env.step(np.zeros((2, 12)))
    assert out.truncated.all()
