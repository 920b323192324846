"""The drifting-goal point experiment (sumo_cli.learn.meta_experiment), in a fast version: every
strategy runs end to end. The measured comparison (5 seeds, hundreds of iterations) is
``python -m sumo_cli.learn.meta_experiment``; at this size nothing is learnt yet."""

import numpy as np
import pytest

from sumo_cli.learn import meta_envs, meta_experiment


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_drifting_goal_point_env():
    env = meta_envs.DriftingGoalPoint(num_groups=2, group_size=3, horizon=4, auto_advance=True)
    obs = env.sample_tasks(0)
    assert obs.shape == (6, 3) and np.all(obs == 0)
    g0 = env.goals.copy()
    assert np.allclose(np.linalg.norm(g0, axis=-1), 1.0)
    for t in range(4):
        out = env.step(np.ones((6, 2)))
    assert out.truncated.all() and np.allclose(out.final_obs[:, :2], 0.8) and np.all(out.obs == 0)
    # auto_advance moved every goal by its chain's angle omega after the episode
    ang = env.phase0 + env.omega
    assert np.all(env.index == 1) and np.allclose(env.goals, np.stack([np.cos(ang), np.sin(ang)], -1))
    assert np.all((0.3 <= np.abs(env.omega)) & (np.abs(env.omega) <= 0.6))
    env.next_task()
    assert np.all(env.index == 2)


@pytest.mark.slow
def test_point_experiment_runs_every_strategy():
    out = meta_experiment.run_seed(0, iters=6, groups=2, group_size=4, horizon=5, rounds=3, eval_seeds=1, hidden=8, log=lambda s: None)
    for k in ("meta", "meta_none", "ppo_none", "ppo_tracking"):
        assert len(out[k]) == 3 and np.isfinite(out[k]).all()
    assert out["meta"][0] == out["meta_none"][0]  # same theta*, same first round
    text = meta_experiment.summarise([out, out])
    assert "ppo_tracking" in text
