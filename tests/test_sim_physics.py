"""The RoboSumo simulation layer: bodies, arena, observations, rules, rewards, robustness.

Every test here runs in a few seconds at most on two cores.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest

from sumo_cli.sim.arena import build_model, scene_xml
from sumo_cli.sim.bodies import BODIES, body_spec
from sumo_cli.sim.sumo_env import (
    A_WINS, B_WINS, DRAW, FALL_REASON, RING_OUT_REASON, RUNNING, TIMEOUT, UNSTABLE,
    BatchedSumo, raw_physics_steps_per_second, run_bout,
)

TARGET_MASS = {"ant": (2.37, 0.85), "bug": (2.31, 0.65), "spider": (2.83, 2.55)}
OBS_SIZE = {"ant": 120, "bug": 164, "spider": 208}
ACT_SIZE = {"ant": 8, "bug": 12, "spider": 16}
N_BODIES = {"ant": 13, "bug": 19, "spider": 25}


def zeros(env: BatchedSumo):
    return np.zeros((env.n_envs, env.n_actions_a)), np.zeros((env.n_envs, env.n_actions_b))


def agent_body_ids(model, prefix):
    return [i for i in range(model.nbody) if model.body(i).name.startswith(prefix)]


# ----------------------------------------------------------------------------- bodies and arena
@pytest.mark.parametrize("body", ["ant", "bug", "spider"])
def test_masses_and_structure(body):
    model = build_model(body, body)
    for prefix in ("agent0/", "agent1/"):
        ids = agent_body_ids(model, prefix)
        assert len(ids) == N_BODIES[body]
        total, torso = TARGET_MASS[body]
        assert model.body_mass[ids].sum() == pytest.approx(total, abs=0.02)
        assert model.body(prefix + "torso").mass[0] == pytest.approx(torso, abs=0.01)
    spec = body_spec(body)
    # densities: the torso sphere's mass is density * volume
    vol = 4 / 3 * math.pi * 0.25 ** 3
    assert model.body("agent0/torso").mass[0] == pytest.approx(spec.torso_density * vol, rel=1e-6)
    assert model.nu == 2 * ACT_SIZE[body]
    # joint order hip_1, knee_1, hip_2, ... right after the free joint, actuators alike
    names = [model.joint(j).name for j in range(model.njnt) if model.joint(j).name.startswith("agent0/")]
    expected = ["agent0/root"] + [f"agent0/{k}_{i}" for i in range(1, spec.n_legs + 1) for k in ("hip", "knee")]
    assert names == expected
    assert [model.actuator(a).name for a in range(spec.n_actions)] == expected[1:]
    assert np.all(model.actuator_gear[:, 0] == 150)
    assert np.all(model.actuator_ctrlrange == [-1, 1])
    hinge = model.jnt_type == mujoco.mjtJoint.mjJNT_HINGE
    assert np.all(model.dof_armature[model.jnt_dofadr[hinge]] == 1)
    assert np.all(model.dof_damping[model.jnt_dofadr[hinge]] == 1)
    assert np.all(model.jnt_limited[hinge])


def test_arena_and_options():
    model = build_model("ant", "spider")
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_RK4
    assert model.opt.timestep == pytest.approx(0.01)
    assert model.opt.jacobian == mujoco.mjtJacobian.mjJAC_DENSE
    fast = build_model("ant", "spider", "fast")
    assert fast.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert fast.opt.timestep == pytest.approx(0.01)
    tatami = model.geom("tatami")
    assert np.allclose(tatami.size, [2.3, 2.3, 0.25]) and np.allclose(tatami.pos, [0, 0, 0.25])
    assert np.allclose(tatami.friction, [1, 0.1, 0.1])
    assert np.allclose(model.geom("floor").pos, [0, 0, -0.025])
    borders = [model.geom(n) for n in ("border_xp", "border_xn", "border_yp", "border_yn")]
    assert all(np.isclose(b.size[0], 0.03) and np.isclose(b.pos[2], 0.5) for b in borders)
    agent_geom = model.geom("agent0/torso_geom")
    assert np.allclose(agent_geom.friction, [1, 0.5, 0.5]) and np.isclose(agent_geom.margin, 0.01)
    with pytest.raises(ValueError, match="unknown body"):
        build_model("ant", "beetle")
    with pytest.raises(ValueError, match="physics"):
        scene_xml("ant", "ant", "euler")


def _contacts(model, data):
    return {tuple(sorted((model.geom(c.geom1).name, model.geom(c.geom2).name))) for c in data.contact}


def test_legs_collide_with_their_own_legs_but_not_with_the_torso():
    # the reference lets every geom collide; MuJoCo's weld/parent filter keeps the overlaps of the
    # rigid segments (welded to the torso, all starting at its centre) out of it
    model = build_model("spider", "spider")
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    assert not any(a.startswith("agent0/") and b.startswith("agent0/") for a, b in _contacts(model, data))
    # the front pair (legs 1 and 2, 30 degrees apart) swung towards each other: the thighs touch
    data.qpos[model.joint("agent0/hip_1").qposadr[0]] = math.radians(-20)
    data.qpos[model.joint("agent0/hip_2").qposadr[0]] = math.radians(20)
    mujoco.mj_forward(model, data)
    assert ("agent0/thigh_1_geom", "agent0/thigh_2_geom") in _contacts(model, data)


@pytest.mark.parametrize("body", sorted(BODIES))
def test_knees_bend_down_by_the_same_amount_on_every_leg(body):
    """Physically the same range on every leg (Ant/Bug: 30..70 degrees down; Spider: 35 down to 45
    up), whatever the joint's own sign; positive bends down on the legs pointing to +x."""
    spec = body_spec(body)
    model = build_model(body, body)
    data = mujoco.MjData(model)
    expected = {"ant": (30, 70), "bug": (30, 70), "spider": (-45, 35)}[body]   # (up, down) as down>0

    def foot_z(leg, angle_deg):
        mujoco.mj_resetData(model, data)
        data.qpos[model.joint(f"agent0/knee_{leg}").qposadr[0]] = math.radians(angle_deg)
        mujoco.mj_kinematics(model, data)
        g = model.geom(f"agent0/shin_{leg}_geom")
        axis = data.geom_xmat[g.id].reshape(3, 3)[:, 2] * model.geom_size[g.id][1]
        return min(data.geom_xpos[g.id][2] + axis[2], data.geom_xpos[g.id][2] - axis[2])

    for i, leg in enumerate(spec.legs, start=1):
        lo, hi = np.degrees(model.jnt_range[model.joint(f"agent0/knee_{i}").id])
        sign = 1 if math.cos(math.radians(leg.azimuth_deg)) > 0 else -1
        assert leg.knee_sign == sign
        down = 1 if foot_z(i, 10) < foot_z(i, -10) else -1      # which sign of the angle lowers the foot
        assert down == sign
        assert sorted(down * np.array([lo, hi])) == pytest.approx(expected)


@pytest.mark.parametrize("body_a", sorted(BODIES))
@pytest.mark.parametrize("body_b", sorted(BODIES))
def test_every_pair_constructs(body_a, body_b):
    env = BatchedSumo(body_a, body_b, 2, seed=0, n_threads=1)
    obs_a, obs_b = env.reset()
    assert obs_a.shape == (2, OBS_SIZE[body_a]) and obs_b.shape == (2, OBS_SIZE[body_b])
    r = env.step(np.zeros((2, ACT_SIZE[body_a])), np.zeros((2, ACT_SIZE[body_b])))
    assert r.obs_a.shape == (2, OBS_SIZE[body_a]) and np.isfinite(r.obs_a).all()


# ----------------------------------------------------------------------------- observations
def test_observation_blocks_match_the_state():
    env = BatchedSumo("ant", "bug", 3, seed=1, n_threads=1)
    a, b = env.a, env.b
    rng = np.random.default_rng(0)
    for _ in range(12):
        r = env.step(rng.uniform(-1, 1, (3, 8)), rng.uniform(-1, 1, (3, 12)))
    for i in range(3):
        d = env.data[i]
        qa, qb = d.qpos[a.qpos_idx], d.qpos[b.qpos_idx]
        oa, ob = r.obs_a[i], r.obs_b[i]
        # own qpos with z relative to the surface, then own qvel
        assert np.allclose(oa[:15], np.r_[qa[:2], qa[2] - 0.5, qa[3:]])
        assert np.allclose(oa[15:29], d.qvel[a.qvel_idx])
        assert np.allclose(ob[:19], np.r_[qb[:2], qb[2] - 0.5, qb[3:]])
        assert np.allclose(ob[19:37], d.qvel[b.qvel_idx])
        # forces: abs(clip(cfrc_ext)) per own body, torso first then each leg's bodies
        fa = np.abs(np.clip(d.cfrc_ext[a.body_ids], -100, 100)).ravel()
        fb = np.abs(np.clip(d.cfrc_ext[b.body_ids], -100, 100)).ravel()
        assert np.allclose(oa[29:29 + 78], fa) and np.allclose(ob[37:37 + 114], fb)
        assert env.model.body(int(a.body_ids[0])).name == "agent0/torso"
        # opponent torso pose (z relative) and forces
        assert np.allclose(oa[107:114], np.r_[qb[:2], qb[2] - 0.5, qb[3:7]])
        assert np.allclose(oa[114:120], np.abs(np.clip(d.cfrc_ext[b.torso_id], -100, 100)))
        assert np.allclose(ob[151:158], np.r_[qa[:2], qa[2] - 0.5, qa[3:7]])
        assert np.allclose(ob[158:164], np.abs(np.clip(d.cfrc_ext[a.torso_id], -100, 100)))


def test_contact_forces_are_filled_after_settling():
    env = BatchedSumo("ant", "ant", 2, seed=2, n_threads=1)
    for _ in range(30):
        r = env.step(*zeros(env))
    forces = r.obs_a[:, 29:107].reshape(2, 13, 6)
    shins = forces[:, 3::3]                        # each leg's third body touches the mat
    assert (shins.sum(axis=(1, 2)) > 1.0).all()
    assert np.abs(forces).max() <= 100.0
    assert (forces >= 0).all()


def test_reset_distribution():
    env = BatchedSumo("bug", "ant", 64, seed=3, n_threads=1)
    obs_a, obs_b = env.reset()
    pa, pb = obs_a[:, :3], obs_b[:, :3]
    ra, rb = np.hypot(pa[:, 0], pa[:, 1]), np.hypot(pb[:, 0], pb[:, 1])
    assert np.all(np.abs(ra - 1.15) < 0.15) and np.all(np.abs(rb - 1.15) < 0.15)
    # opposite sides: the angle between them is pi up to the noise
    cos = (pa[:, :2] * pb[:, :2]).sum(1) / (ra * rb)
    assert np.all(cos < -0.98)
    assert np.all(np.abs(pa[:, 2] - 0.75) <= 0.1 + 1e-9)          # 1.25 world
    phi = np.arctan2(pa[:, 1], pa[:, 0])
    assert np.ptp(phi) > 4.0                                       # start angles spread out
    q = obs_a[:, 3:7]                                              # noisy identity quaternion
    assert np.all(np.abs(q - [1, 0, 0, 0]) <= 0.1 + 1e-9) and q[:, 1:].std() > 0.03


# ----------------------------------------------------------------------------- rules
def teleport(env, i, layout, x, y, z=None):
    d = env.data[i]
    s = layout.qpos_start
    d.qpos[s:s + 2] = (x, y)
    if z is not None:
        d.qpos[s + 2] = z
    d.qvel[layout.qvel_start:layout.qvel_start + 6] = 0.0


def test_ring_out_decides_the_bout_and_auto_resets():
    env = BatchedSumo("ant", "ant", 3, seed=4, n_threads=1)
    for _ in range(20):
        env.step(*zeros(env))
    teleport(env, 0, env.a, 2.15, 0.3)       # A out by x
    teleport(env, 1, env.b, -0.4, -2.15)     # B out by y
    teleport(env, 2, env.a, 2.15, 0.0)       # both out: a draw
    teleport(env, 2, env.b, -2.15, 0.0)
    r = env.step(*zeros(env))
    assert r.done.tolist() == [True, True, True]
    assert r.outcome.tolist() == [B_WINS, A_WINS, DRAW]
    assert r.reason.tolist() == [RING_OUT_REASON] * 3
    assert r.sparse_a.tolist() == [-2000, 2000, -1000] and r.sparse_b.tolist() == [2000, -2000, -1000]
    assert not r.truncated.any()
    assert r.length.tolist() == [21, 21, 21]
    # terminal observation shows the ring-out; obs is the first observation of a new bout
    assert r.final_obs_a[0, 0] > 2.1 and abs(r.obs_a[0, 0]) < 1.3
    assert np.allclose(r.obs_a[:, 2], r.obs_a[:, 2].clip(0.65, 0.85))  # dropped from 1.25 again
    assert env.length.tolist() == [0, 0, 0]
    r2 = env.step(*zeros(env))
    assert r2.length.tolist() == [1, 1, 1] and not r2.done.any()


def test_ring_out_threshold():
    env = BatchedSumo("ant", "ant", 2, seed=5, n_threads=1)
    for _ in range(20):
        env.step(*zeros(env))
    teleport(env, 0, env.a, 2.0, 2.0)      # max-norm 2.0: still in (the border lines)
    teleport(env, 1, env.a, 1.5, -2.12)    # max-norm 2.12: out
    r = env.step(*zeros(env))
    assert r.outcome.tolist() == [RUNNING, B_WINS]


def test_fall_is_a_loss():
    env = BatchedSumo("ant", "ant", 1, seed=6, n_threads=1)
    for _ in range(15):
        env.step(*zeros(env))
    d = env.data[0]
    s = env.b.qpos_start
    # B upside down with its torso just over the mat: the legs point up and it drops onto its back
    d.qpos[s:s + 7] = (0.5, 0.5, 0.5 + 0.27, 0.0, 1.0, 0.0, 0.0)
    d.qvel[env.b.qvel_start:env.b.qvel_start + 6] = 0.0
    r = env.step(*zeros(env))
    assert r.outcome[0] == A_WINS and r.reason[0] == FALL_REASON
    assert r.sparse_a[0] == 2000 and r.sparse_b[0] == -2000
    assert r.final_obs_b[0, 2] < 0.29


def test_step_limit_draw_and_penalty_on_step_501():
    env = BatchedSumo("ant", "ant", 2, seed=7, physics="fast", n_threads=1)
    for t in range(500):
        r = env.step(*zeros(env))
        assert not r.done.any(), f"a motionless bout ended at step {t + 1}"
        assert not r.sparse_a.any() and not r.sparse_b.any()
    teleport(env, 1, env.a, 2.2, 0.0)        # bout 1: A loses on the very last step
    r = env.step(*zeros(env))
    assert r.done.tolist() == [True, True]
    assert r.length.tolist() == [501, 501]
    assert r.outcome.tolist() == [DRAW, B_WINS]
    assert r.reason.tolist() == [TIMEOUT, RING_OUT_REASON]
    assert r.truncated.tolist() == [True, False]
    assert r.sparse_a.tolist() == [-1000, -3000] and r.sparse_b.tolist() == [-1000, 1000]


def test_without_auto_reset_finished_bouts_freeze():
    env = BatchedSumo("ant", "ant", 2, seed=8, auto_reset=False, n_threads=1)
    for _ in range(10):
        env.step(*zeros(env))
    teleport(env, 0, env.a, 2.2, 0.0)
    r = env.step(*zeros(env))
    assert r.done.tolist() == [True, False] and env.finished.tolist() == [True, False]
    qpos = env.data[0].qpos.copy()
    r2 = env.step(*zeros(env))
    assert not r2.done.any() and r2.outcome[0] == RUNNING
    assert np.array_equal(env.data[0].qpos, qpos)            # not stepped
    assert np.array_equal(r2.obs_a[0], r.final_obs_a[0])
    assert r2.dense_a[0] == 0 and r2.length[0] == 11 and r2.length[1] == 12
    obs_a, _ = env.reset_envs([0])
    assert not env.finished.any() and env.length[0] == 0 and abs(obs_a[0, 2] - 0.75) < 0.11


# ----------------------------------------------------------------------------- rewards
def test_dense_reward_terms():
    env = BatchedSumo("ant", "bug", 4, seed=9, n_threads=1)
    rng = np.random.default_rng(1)
    act_a = rng.uniform(-2, 2, (4, 8))                 # raw actions beyond the control range
    act_b = rng.uniform(-1, 1, (4, 12))
    obs_a, obs_b = env.observe()
    r = env.step(act_a, act_b)
    assert np.allclose(r.control_a, -0.1 * (act_a ** 2).sum(1))
    assert np.allclose(r.control_b, -0.1 * (act_b ** 2).sum(1))
    opp_xy_a = r.obs_a[:, 107:109]                     # B's torso as A sees it
    assert np.allclose(r.push_a, -10 * np.exp(-np.linalg.norm(opp_xy_a, axis=1)))
    assert np.allclose(r.push_b, -10 * np.exp(-np.linalg.norm(r.obs_a[:, :2], axis=1)))
    v = (r.obs_a[:, :2] - obs_a[:, :2]) / 0.05
    u = opp_xy_a - obs_a[:, :2]
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    assert np.allclose(r.move_a, 0.1 * np.maximum(0, (v * u).sum(1)))
    assert np.allclose(r.dense_a, r.control_a + r.push_a + r.move_a)
    assert np.allclose(r.dense_b, r.control_b + r.push_b + r.move_b)
    assert (r.move_a >= 0).all() and (r.push_a < 0).all()
    assert np.array_equal(env.data[0].ctrl[:8], act_a[0])  # MuJoCo clamps internally


# ----------------------------------------------------------------------------- determinism
def test_same_seed_same_bouts_whatever_the_threads():
    rng = np.random.default_rng(2)
    acts = [(rng.uniform(-1, 1, (4, 8)), rng.uniform(-1, 1, (4, 16))) for _ in range(25)]
    runs = []
    for n_threads, seed in ((1, 11), (2, 11), (1, 12)):
        env = BatchedSumo("ant", "spider", 4, seed=seed, n_threads=n_threads)
        for a, b in acts:
            r = env.step(a, b)
        runs.append((r.obs_a, r.obs_b))
        env.close()
    assert np.array_equal(runs[0][0], runs[1][0]) and np.array_equal(runs[0][1], runs[1][1])
    assert not np.allclose(runs[0][0], runs[2][0])
    # reset(seed) restarts the same sequence
    env = BatchedSumo("ant", "spider", 4, seed=11, n_threads=1)
    first = env.reset(seed=11)[0]
    assert np.array_equal(first, env.reset(seed=11)[0])


# ----------------------------------------------------------------------------- bad input
def test_bad_actions_name_the_agent():
    env = BatchedSumo("ant", "bug", 16, seed=0, n_threads=1)
    with pytest.raises(ValueError, match=r"agent A \(ant\): expected actions of shape \(16, 8\), got \(16, 12\)"):
        env.step(np.zeros((16, 12)), np.zeros((16, 12)))
    with pytest.raises(ValueError, match=r"agent B \(bug\): expected actions of shape \(16, 12\)"):
        env.step(np.zeros((16, 8)), np.zeros((12,)))
    bad = np.zeros((16, 12))
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match=r"agent B \(bug\): actions contain NaN or inf \(bouts \[3\]\)"):
        env.step(np.zeros((16, 8)), bad)
    inf = np.zeros((16, 8))
    inf[0, 0] = np.inf
    with pytest.raises(ValueError, match=r"agent A \(ant\).*NaN or inf"):
        env.step(inf, np.zeros((16, 12)))
    assert env.length.max() == 0                      # nothing was stepped


def test_unstable_bout_is_a_draw_and_the_rest_go_on(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)                       # MuJoCo writes MUJOCO_LOG.TXT on warnings
    env = BatchedSumo("ant", "ant", 4, seed=13, n_threads=2)
    for _ in range(5):
        env.step(*zeros(env))
    before = env.data[0].qpos.copy()
    env.data[1].qvel[3] = np.nan
    env.data[2].qvel[:] = 1e12
    r = env.step(*zeros(env))
    assert r.done.tolist() == [False, True, True, False]
    assert r.outcome.tolist() == [RUNNING, DRAW, DRAW, RUNNING]
    assert r.reason.tolist() == [0, UNSTABLE, UNSTABLE, 0]
    assert not r.sparse_a.any() and not r.sparse_b.any() and not r.truncated.any()
    assert r.dense_a[1] == 0 and r.dense_a[0] != 0
    assert env.unstable_count == 2
    assert np.isfinite(r.obs_a).all() and np.isfinite(r.final_obs_a).all()
    assert not np.array_equal(env.data[0].qpos, before)   # the healthy bouts were stepped
    assert env.length.tolist() == [6, 0, 0, 6]
    # a bout broken on its very first step (its clock at 0 either way) is caught too
    env.data[1].qacc_warmstart[:] = 0
    env.data[1].qvel[:] = np.inf
    r = env.step(*zeros(env))
    assert r.reason[1] == UNSTABLE and env.unstable_count == 3
    for _ in range(3):
        r = env.step(*zeros(env))
    assert np.isfinite(r.obs_a).all() and env.length.tolist() == [10, 3, 4, 10]


# ----------------------------------------------------------------------------- conveniences
def test_run_bout_and_raw_reference():
    out = run_bout("ant", "ant", lambda o: np.zeros(8), lambda o: np.zeros(8),
                   physics="fast", seed=1)
    assert out["outcome"] == "draw" and out["reason"] == "timeout" and out["length"] == 501
    assert out["sparse_a"] == -1000 and out["dense_a"] < 0
    rate = raw_physics_steps_per_second(build_model("ant", "ant", "fast"), 2, 1, n_steps=5)
    assert rate > 0
