"""The locomotion-direction benchmark (benchmarks/maml_dir.py): the Ant scene, the reward's sign and
the task-distribution contract, at tiny size."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import torch

from benchmarks.maml_dir import AntDirection, CTRL_COST
from sumo_cli.learn import meta as ML
from sumo_cli.learn import tasks as TK
from sumo_cli.nets import policy as P
from sumo_cli.sim import locomotion as LOC


def _with_directions(env: AntDirection, dirs) -> np.ndarray:
    env.tasks = np.asarray(dirs, dtype=np.float64)
    return env.next_task()


def test_the_scene_is_the_locomotion_scene_with_the_ant_and_the_bug_default_is_unchanged():
    env = AntDirection(1, 1)
    assert env.model.nu == 8 and env.model.nq == 15
    assert all(env.model.actuator(k).name.startswith("ant/") for k in range(8))
    assert LOC.scene_xml() == LOC.scene_xml("fast", "bug")
    assert LOC.build_model().nu == 12


def test_reward_is_the_velocity_along_the_task_direction():
    env = AntDirection(2, 2, seed=3)
    _with_directions(env, [1.0, -1.0])   # envs 0, 1 forward; 2, 3 backward
    for i, d in enumerate(env.data):    # every Ant is shoved along +x, then does nothing
        d.qvel[0] = 2.0
        mujoco.mj_forward(env.model, d)
        env.state[i, env.nq:] = d.qvel
    x0 = env.state[:, 0].copy()
    out = env.step(np.zeros((4, 8)))
    dx = env.state[:, 0] - x0
    assert (dx > 0.02).all()            # all moved forward
    np.testing.assert_allclose(out.reward, [1, 1, -1, -1] * dx / LOC.DT, rtol=1e-5)
    # the control cost: the same push with full torques earns CTRL_COST * 8 less than its velocity
    _with_directions(env, [1.0, 1.0])
    x0 = env.state[:, 0].copy()
    out = env.step(np.ones((4, 8)) * 5.0)   # clipped to 1
    np.testing.assert_allclose(out.reward, (env.state[:, 0] - x0) / LOC.DT - CTRL_COST * 8, rtol=1e-5)


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


def test_the_meta_learner_runs_on_it():
    torch.manual_seed(0)
    spec = P.PolicySpec("mlp", AntDirection.obs_dim, AntDirection.act_dim, hidden=8)
    theta = P.init_params(spec, torch.Generator().manual_seed(0))
    cfg = ML.MetaConfig(inner_data="fresh", outer_steps="all")
    log_alpha = torch.full((cfg.num_steps, len(ML.GaussianModel(spec).param_shapes())), math.log(0.1))
    out = TK.adaptation_curve(AntDirection(2, 2, seed=1, horizon=4), spec, theta, log_alpha, cfg, steps=2, seed=1)
    assert out.shape == (3, 2) and np.isfinite(out).all()
