"""The locomotion task for learners: the TaskChainEnv adapter (sumo_cli.meta.locomotion_tasks),
PPO and Algorithm 1 on it, and the 7-episode evaluation protocol (sumo_cli.compete.locomotion_eval).
Tiny sizes: these check the plumbing, nothing is learnt."""

import numpy as np
import pytest

from sumo_cli.compete import locomotion_eval as LE
from sumo_cli import meta as ML
from sumo_cli.meta import meta_train as MT
from sumo_cli.ppo import ppo as PPO
from sumo_cli.meta.locomotion_tasks import LocomotionChain
from sumo_cli.nets import policy as P
from sumo_cli.sim import locomotion as L


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_chain_adapter_tasks():
    env = LocomotionChain(3, 2, horizon=4, seed=0, n_threads=1)
    obs = env.sample_tasks(5)
    assert obs.shape == (6, 37)
    assert np.all((1 <= env.episode) & (env.episode <= 6))
    pairs = env.env.pairs
    for g in range(3):
        assert pairs[2 * g] == pairs[2 * g + 1] == env.group_pairs[g] and env.group_pairs[g] in L.TRAIN_PAIRS
    k0 = env.episode.copy()
    for t in range(8):  # two episodes inside one task: same factor, no auto-advance
        out = env.step(np.ones((6, 12)))
        assert np.allclose(out.info["factor"], L.factor(np.repeat(k0, 2)))
    env.next_task()
    assert np.array_equal(env.episode, k0 + 1)
    assert np.array_equal(env.env.episode, np.repeat(k0 + 1, 2))
    # same seed, same chains
    env2 = LocomotionChain(3, 2, horizon=4, seed=0, n_threads=1)
    assert np.array_equal(env2.sample_tasks(5), obs) and env2.group_pairs == env.group_pairs
    # evaluation chains: a fixed pair from episode 1, 7 tasks then stop
    ev = LocomotionChain(2, 1, [L.TEST_PAIRS["front"]], start=1, horizon=4, n_threads=1)
    ev.sample_tasks(0)
    for k in range(2, 8):
        ev.next_task()
    assert np.all(ev.env.factors() == 0) and ev.env.pairs == [(0, 1), (0, 1)]
    with pytest.raises(ValueError):
        ev.next_task()


def test_train_ppo_smoke():
    env = L.LocomotionEnv(4, resample_pairs=True, horizon=10, seed=0, n_threads=2)
    spec = P.PolicySpec("mlp", env.obs_dim, env.act_dim, hidden=16)
    cfg = PPO.PPOConfig(num_steps=20, epochs=1, num_minibatches=2)
    res = PPO.train_ppo(env, spec, cfg, 2, seed=0)
    assert len(res.history) == 2 and res.history[-1]["episodes"] == 8
    assert all(np.isfinite(v).all() for v in res.params.values() for v in [v.detach().numpy()])
    env.close()


def test_meta_train_and_evaluate_every_strategy():
    spec = P.PolicySpec("mlp", 37, 12, hidden=16)
    cfg = ML.MetaConfig(num_steps=1)
    env = LocomotionChain(2, 2, horizon=10, seed=0, n_threads=2)
    res = MT.meta_train(env, spec, cfg, 2, 0, steps_pre=10, steps_post=10)
    env.close()
    assert len(res.history) == 2 and np.isfinite(res.history[-1]["post_episode_return"])
    stats = {k: v.clone() for k, v in res.obs_norm.stats.items()}
    kw = dict(repeats=4, seed=1, log_alpha=res.log_alpha, cfg=cfg, horizon=10, n_threads=2,
              ppo_cfg=PPO.PPOConfig(epochs=1, num_minibatches=1))
    out = {s: LE.evaluate(res.theta, spec, stats, s, "back", **kw) for s in ("none", "track", "meta")}
    for s, r in out.items():
        assert r["returns"].shape == (7, 4) and r["mean"].shape == (7,) and r["ci95"].shape == (7,)
        assert np.isfinite(r["returns"]).all() and (r["ci95"] >= 0).all() and r["legs"] == (4, 5)
    # episode 1 is played before any adaptation: identical for every strategy (same seed)
    assert np.allclose(out["none"]["returns"][0], out["meta"]["returns"][0])
    assert np.allclose(out["none"]["returns"][0], out["track"]["returns"][0])
    # adaptation changes later episodes; repeating with the same seed reproduces them
    assert not np.allclose(out["none"]["returns"][1:], out["track"]["returns"][1:])
    again = LE.evaluate(res.theta, spec, stats, "meta", (5, 4), **kw)
    assert again["pair"] == "back" and np.array_equal(again["returns"], out["meta"]["returns"])
    assert "ep1" in LE.format_table({("meta", "back"): again})
