"""The task API (sumo_cli.meta.tasks): distributions and chains, the MAML-style adaptation curve,
the execution-time adapters, and the new-task example of docs/method.md (run as written, at fewer
iterations)."""

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from benchmarks.maml_tasks import Navigation2D
from sumo_cli import meta as ML
from sumo_cli.meta import tasks as TK
from sumo_cli.nets import policy as P

pytestmark = pytest.mark.usefixtures("one_torch_thread")
METHOD = Path(__file__).resolve().parents[1] / "docs" / "method.md"


class Drift(Navigation2D):
    def successor(self, rng, tasks):
        return tasks + 0.1


def test_distribution_keeps_the_task_and_a_chain_moves_it():
    d, c = Navigation2D(3, 2, seed=0), Drift(3, 2, seed=0)
    assert (d.kind, c.kind) == ("distribution", "chain")
    for env in (d, c):
        env.sample_tasks(5)
    assert np.array_equal(d.tasks, c.tasks)
    g0 = d.tasks.copy()
    d.next_task(), c.next_task()
    assert np.array_equal(d.tasks, g0) and np.allclose(c.tasks, g0 + 0.1)
    assert np.array_equal(d.env_tasks, np.repeat(g0, 2, axis=0))  # envs of a group share its task


def test_navigation_matches_the_published_task():
    """Finn et al.: start at the origin, actions clipped to 0.1, reward -distance after the move,
    100 steps (a termination: the horizon is part of the task); the point stops at the goal."""
    env = Navigation2D(1, 1, seed=0)
    env.tasks = np.array([[0.3, 0.0]])
    obs = env.next_task()
    assert np.array_equal(obs, [[0.0, 0.0]])
    out = env.step(np.array([[5.0, 0.0]]))
    assert np.allclose(out.obs, [[0.1, 0.0]]) and np.isclose(out.reward[0], -0.2, atol=1e-6)
    env.step(np.array([[1.0, 0.0]]))
    out = env.step(np.array([[1.0, 0.0]]))  # reaches (0.3, 0)
    assert np.isclose(out.reward[0], 0.0, atol=1e-6)
    for t in range(4, 101):  # step t of the episode
        out = env.step(np.array([[1.0, 0.0]]))
        assert out.reward[0] == 0.0  # stays put at the goal
        assert bool(out.terminated[0]) == (t == 100)
    assert np.array_equal(out.obs, [[0.0, 0.0]]) and np.allclose(out.final_obs, [[0.3, 0.0]], atol=1e-6)


def test_adaptation_curve_first_step_is_the_learnt_update():
    """After 0 steps the curve plays theta; its step 1 is one inner step of the meta-learner (step
    size alpha_1) on theta's own episodes, as meta-training takes it."""
    spec = P.PolicySpec("mlp", 2, 2, hidden=8)
    cfg = ML.MetaConfig()
    theta = P.init_params(spec, torch.Generator().manual_seed(0))
    la = ML.init_log_alpha(cfg, ML.GaussianModel(spec))
    out = TK.adaptation_curve(Navigation2D(2, 3, seed=0), spec, theta, la, cfg, steps=2, seed=4)
    assert out.shape == (3, 2) and np.isfinite(out).all()
    same = TK.adaptation_curve(Navigation2D(2, 3, seed=0), spec, theta, la, cfg, steps=2, seed=4)
    assert np.array_equal(out, same)  # seeded


def test_continue_adapter_takes_one_step_per_round_from_the_current_parameters():
    spec = P.PolicySpec("mlp", 3, 2, hidden=5)
    model = ML.GaussianModel(spec)
    cfg = ML.MetaConfig()
    g = torch.Generator().manual_seed(0)
    theta = P.init_params(spec, g, torch.float64)
    la = ML.init_log_alpha(cfg, model, (), torch.float64) + 0.1 * torch.randn(3, 13, generator=g, dtype=torch.float64)

    def episodes(params, seed):
        gg = torch.Generator().manual_seed(seed)
        L, K = 6, 4
        x = torch.randn(L, 1, K, 3, generator=gg, dtype=torch.float64)
        a = torch.randn(L, 1, K, 2, generator=gg, dtype=torch.float64)
        b = ML.episode_batch(x, a, torch.zeros(L, 1, K, dtype=torch.float64), torch.zeros(L, 1, K, dtype=torch.float64),
                             torch.randn(L, 1, K, generator=gg, dtype=torch.float64), torch.full((1, K), L), gamma=cfg.gamma)
        with torch.no_grad():
            b.logp, _ = model.evaluate(ML.expand_params(model, params, (1,)), b)  # on-policy
        return b

    ad = ML.execution_adapter(model, theta, la, cfg)
    assert isinstance(ad, ML.ContinueAdapter)
    cur = ML.expand_params(model, theta, (1,))
    for r in range(5):
        b = episodes(ad.compute(), 10 + r)
        ad.add(b)
        m = min(r, 2)
        ref = ML.adapt(model, cur, la[m : m + 1], b, cfg.replace(num_steps=1, iw="none"), behaviour="data")
        for k in ref:
            torch.testing.assert_close(ad.compute()[k], ref[k], rtol=1e-9, atol=1e-12)
        cur = ref
    assert isinstance(ML.execution_adapter(model, theta, la, ML.MetaConfig.paper()), ML.ExecutionAdapter)


def readme_example() -> str:
    text = METHOD.read_text()
    section = text.split("### Meta-learning on a new task", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_new_task_example_runs_and_adapts(capsys):
    """docs/method.md's complete new-task example, as written except for fewer meta-iterations: it
    runs, is at most 60 lines, and the meta-trained update improves the return on held-out tasks
    of the distribution within its 3 steps."""
    code = readme_example()
    assert len(code.strip().splitlines()) <= 60
    assert "iterations=30" in code
    ns: dict = {"__name__": "readme_example"}
    exec(compile(code.replace("iterations=30", "iterations=12"), "docs/method.md", "exec"), ns)
    out = capsys.readouterr().out
    rows = re.findall(r"(\w+) mean return after 0, 1, 2, 3 steps: \[(.*?)\]", out)
    assert [r[0] for r in rows] == ["FindTheSpot", "DriftingSpot"]
    start, *after = [float(v) for v in rows[0][1].split()]
    assert max(after) > start + 1.0
