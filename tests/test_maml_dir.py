"""The locomotion-direction benchmark (benchmarks/maml_dir.py): the Ant scene, the planar runner, the
reward's sign and the task-distribution contract, at tiny size."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

from benchmarks import planar_runner as PR
from benchmarks.maml_dir import TASKS, AntDirection, DirectionTask, RunnerDirection, oracle_task
from benchmarks.maml_nav import config_overrides
from sumo_cli import meta as ML
from sumo_cli.meta import tasks as TK
from sumo_cli.nets import policy as P
from sumo_cli.sim import locomotion as LOC


def _with_directions(env: DirectionTask, dirs) -> np.ndarray:
    env.tasks = np.asarray(dirs, dtype=np.float64)
    return env.next_task()


def test_the_scene_is_the_locomotion_scene_with_the_ant_and_the_bug_default_is_unchanged():
    env = AntDirection(1, 1)
    assert env.model.nu == 8 and env.model.nq == 15
    assert all(env.model.actuator(k).name.startswith("ant/") for k in range(8))
    assert LOC.scene_xml() == LOC.scene_xml("fast", "bug")
    assert LOC.build_model().nu == 12


def test_the_runner_is_planar_and_stands():
    """Six motors, root slide x / slide z / hinge y; observation without the root's x; left alone from
    its reset it settles on its legs (torso above the floor, not flipped) without blowing up."""
    env = RunnerDirection(1, 1, seed=0)
    m = env.model
    assert (m.nu, m.nq, m.nv) == (6, 9, 9) and env.state.shape == (1, RunnerDirection.obs_dim)
    assert [m.joint(k).name for k in range(3)] == ["rootx", "rootz", "rooty"]
    for _ in range(40):
        env.step(np.zeros((1, 6)))
    z = PR.START_Z + env.qpos[0, 1]
    assert 0.25 < z < 0.9 and abs(env.qpos[0, 2]) < 0.5 and env.unstable_count == 0


@pytest.mark.parametrize("body", ["ant", "runner"])
def test_reward_is_the_velocity_along_the_task_direction(body):
    env = TASKS[body](2, 2, seed=3)
    pos = env.body.position
    _with_directions(env, [1.0, -1.0])   # envs 0, 1 forward; 2, 3 backward
    for i, d in enumerate(env.data):    # every body is shoved along +x, then does nothing
        d.qvel[0] = 2.0
        mujoco.mj_forward(env.model, d)
        env.qvel[i] = d.qvel
    x0 = pos(env.qpos).copy()
    out = env.step(np.zeros((4, env.act_dim)))
    dx = pos(env.qpos) - x0
    assert (dx > 0.02).all()            # all moved forward
    np.testing.assert_allclose(out.reward, [1, 1, -1, -1] * dx / env.body.dt, rtol=1e-5)
    # the control cost: the same push with full torques earns ctrl_cost * act_dim less than its velocity
    _with_directions(env, [1.0, 1.0])
    x0 = pos(env.qpos).copy()
    out = env.step(np.ones((4, env.act_dim)) * 5.0)   # clipped to 1
    np.testing.assert_allclose(out.reward, (pos(env.qpos) - x0) / env.body.dt - env.body.ctrl_cost * env.act_dim, rtol=1e-5)


def test_goal_velocity_reward_is_minus_the_speed_error():
    env = TASKS["runner-vel"](4, 1, seed=3)
    assert ((env.tasks >= 0) & (env.tasks <= 2)).all() and len(np.unique(env.tasks)) == 4
    env.env_tasks = np.array([0.0, 0.5, 1.5, 2.0])
    for i, d in enumerate(env.data):  # every runner is shoved along +x, then does nothing
        d.qvel[0] = 1.0
        mujoco.mj_forward(env.model, d)
        env.qvel[i] = d.qvel
    x0 = env.body.position(env.qpos).copy()
    out = env.step(np.zeros((4, env.act_dim)))
    v = (env.body.position(env.qpos) - x0) / env.body.dt
    assert (v > 0.3).all()
    np.testing.assert_allclose(out.reward, -np.abs(v - env.env_tasks), rtol=1e-5)


def test_a_distribution_keeps_directions_and_the_pretraining_stream_redraws_them():
    env = AntDirection(6, 1, seed=0, horizon=3)
    env.sample_tasks(0)
    before = env.tasks.copy()
    env.next_task()
    assert (env.tasks == before).all() and set(np.unique(env.env_tasks)) <= {-1.0, 1.0}
    ends = [env.step(np.zeros((6, 8))).terminated for _ in range(3)]
    assert not ends[0].any() and ends[2].all()   # the horizon ends every episode as a termination
    stream = AntDirection(40, 1, seed=0, horizon=2, resample_every_episode=True)
    stream.sample_tasks(1)
    first = stream.env_tasks.copy()
    for _ in range(2):
        stream.step(np.zeros((40, 8)))
    assert (stream.env_tasks != first).any()


@pytest.mark.parametrize("body", sorted(TASKS))
def test_the_meta_learner_runs_on_it(body):
    torch.manual_seed(0)
    task_cls = TASKS[body]
    spec = P.PolicySpec("mlp", task_cls.obs_dim, task_cls.act_dim, hidden=8)
    theta = P.init_params(spec, torch.Generator().manual_seed(0))
    cfg = ML.MetaConfig(inner_data="fresh", outer_steps="all")
    log_alpha = torch.full((cfg.num_steps, len(ML.GaussianModel(spec).param_shapes())), math.log(0.1))
    out = TK.adaptation_curve(task_cls(2, 2, seed=1, horizon=4), spec, theta, log_alpha, cfg, steps=2, seed=1)
    assert out.shape == (3, 2) and np.isfinite(out).all()


def test_the_oracle_observes_its_task_across_episode_boundaries():
    """MAML's oracle sees the task as its last input: after an episode ends in the pre-training stream,
    the final observation carries the old direction and the next one the redrawn direction."""
    cls = oracle_task(RunnerDirection)
    env = cls(8, 1, seed=0, horizon=2, resample_every_episode=True)
    obs = env.sample_tasks(2)
    assert obs.shape == (8, RunnerDirection.obs_dim + 1) and (obs[:, -1] == env.env_tasks).all()
    np.testing.assert_array_equal(obs[:, :-1], RunnerDirection(8, 1).body.observe(env.qpos, env.qvel).astype(np.float32))
    env.step(np.zeros((8, 6)))
    old = env.env_tasks.copy()
    out = env.step(np.zeros((8, 6)))
    assert out.terminated.all() and (env.env_tasks != old).any()
    assert (out.final_obs[:, -1] == old).all() and (out.obs[:, -1] == env.env_tasks).all()


def test_config_overrides_parse_as_their_fields_types():
    got = config_overrides(["outer_epochs=8", "lr=1e-3", "clip_value=None", "score_term=false", "outer_steps=all"])
    assert got == {"outer_epochs": 8, "lr": 1e-3, "clip_value": None, "score_term": False, "outer_steps": "all"}
    ML.MetaConfig(**got)
    with pytest.raises(SystemExit, match="no field 'epochs'"):
        config_overrides(["epochs=3"])


def test_parts_of_one_seed_merge_and_different_settings_are_refused():
    from benchmarks.maml_dir import merge_by_seed, summarise
    meta = [{"seed": s, "body": "runner", "iters": 600, "meta": [-20.0 + s, 100.0, 110.0, 120.0]} for s in (0, 1)]
    base = [{"seed": s, "body": "runner", "iters": 600, "pretrained_ft_0.1": [0.0, -1.0, -2.0, -3.0]} for s in (1, 0)]
    merged = merge_by_seed(meta + base)
    assert [r["seed"] for r in merged] == [0, 1]
    assert all("meta" in r and "pretrained_ft_0.1" in r for r in merged)
    table = summarise(merged)
    assert "pretrained_ft_0.1" in table and "-19.5" in table
    with pytest.raises(SystemExit, match="iters 600 and 300"):
        merge_by_seed(meta + [{"seed": 0, "body": "runner", "iters": 300, "pretrained_ft_0.1": [0.0] * 4}])
