"""The PettingZoo ParallelEnv of one bout: PettingZoo's own API and seed tests, rewards and
infos as the rules say, and rgb_array frames."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("pettingzoo", reason="the optional pettingzoo group is not installed (pip install 'sumo[pettingzoo]')")

from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test  # noqa: E402

from sumo_cli.sim import sumo_env as E  # noqa: E402
from sumo_cli.sim.pettingzoo_env import SumoParallelEnv, env as aec_env, parallel_env  # noqa: E402


@pytest.mark.parametrize("bodies", [("ant", "bug"), ("spider", "spider")])
def test_parallel_api_test(bodies):
    env = parallel_env(body_a=bodies[0], body_b=bodies[1], seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # PettingZoo reports most API slips as warnings
        parallel_api_test(env, num_cycles=1000)
    env.close()


def test_parallel_seed_test():
    parallel_seed_test(lambda: parallel_env(body_a="ant", body_b="spider"))


def test_aec_conversion_passes_the_aec_api_test():
    env = aec_env(body_a="bug", body_b="bug", seed=1)   # unequal bodies only draw "different sizes" advice
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # unbounded positions and velocities: the observation Box is (-inf, inf) on purpose
        warnings.filterwarnings("ignore", message=".*observation space value is")
        api_test(env, num_cycles=1000)
    env.close()


def test_spaces_match_the_bodies():
    env = SumoParallelEnv("ant", "spider")
    assert env.possible_agents == ["agent_0", "agent_1"]
    assert env.observation_space("agent_0").shape == (120,) and env.action_space("agent_0").shape == (8,)
    assert env.observation_space("agent_1").shape == (208,) and env.action_space("agent_1").shape == (16,)
    assert env.observation_space("agent_0").dtype == np.float32
    assert float(env.action_space("agent_1").low.min()) == -1.0 and float(env.action_space("agent_1").high.max()) == 1.0
    obs, infos = env.reset(seed=4)
    assert env.agents == ["agent_0", "agent_1"]
    for a in env.agents:
        assert env.observation_space(a).contains(obs[a]) and infos[a] == {}
    env.close()


def _play(env: SumoParallelEnv, seed: int, policy) -> list:
    steps = []
    obs, _ = env.reset(seed=seed)
    while env.agents:
        obs, rew, term, trunc, info = env.step({a: policy(a, obs[a]) for a in env.agents})
        steps.append((obs, rew, term, trunc, info))
    return steps


def test_a_decided_bout_terminates_with_the_sparse_reward():
    env = parallel_env(body_a="ant", body_b="bug")
    rng = np.random.default_rng(0)
    steps = _play(env, 3, lambda a, o: rng.uniform(-1, 1, env.action_space(a).shape))
    for obs, rew, term, trunc, info in steps:
        for a in ("agent_0", "agent_1"):
            assert rew[a] == pytest.approx(info[a]["dense"] + info[a]["sparse"])
            assert info[a]["dense"] == pytest.approx(info[a]["control"] + info[a]["push"] + info[a]["move"])
    _, rew, term, trunc, info = steps[-1]
    assert term == {"agent_0": True, "agent_1": True} and trunc == {"agent_0": False, "agent_1": False}
    a, b = info["agent_0"], info["agent_1"]
    assert a["reason"] in ("ring_out", "fall") and a["length"] == len(steps) < E.MAX_STEPS
    assert {a["outcome"], b["outcome"]} in ({"win", "loss"}, {"draw"})
    if a["outcome"] == "win":
        assert (a["sparse"], b["sparse"]) == (E.WIN_REWARD, E.LOSE_REWARD)
    assert all(not any(t.values()) for _, _, t, _, _ in steps[:-1])
    with pytest.raises(RuntimeError, match="reset"):
        env.step({})
    env.close()


def test_the_step_limit_truncates_as_a_draw():
    env = parallel_env(body_a="ant", body_b="ant", physics="fast")
    steps = _play(env, 0, lambda a, o: np.zeros(8, np.float32))   # nobody moves: a time-out
    _, rew, term, trunc, info = steps[-1]
    assert len(steps) == E.MAX_STEPS + 1
    assert trunc == {"agent_0": True, "agent_1": True} and term == {"agent_0": False, "agent_1": False}
    for a in ("agent_0", "agent_1"):
        assert info[a]["outcome"] == "draw" and info[a]["reason"] == "timeout"
        assert info[a]["sparse"] == E.DRAW_REWARD
    env.close()


def test_same_seed_same_bout_and_reset_reseeds():
    actions = np.random.default_rng(7).uniform(-1, 1, (2 * E.MAX_STEPS + 2, 8))

    def scripted():
        k = iter(range(len(actions)))
        return lambda a, o: actions[next(k)]

    e1, e2 = parallel_env(), parallel_env()
    s1 = _play(e1, 5, scripted())
    s2 = _play(e2, 5, scripted())
    s3 = _play(e1, 5, scripted())   # the same env, re-seeded
    assert len(s1) == len(s2) == len(s3)
    for x, y, z in zip(s1, s2, s3):
        for k in range(5):
            for a in ("agent_0", "agent_1"):
                assert np.array_equal(x[k][a], y[k][a]) and np.array_equal(x[k][a], z[k][a])
    o1, _ = e1.reset(seed=5)
    o2, _ = e1.reset()          # no seed: the next start of the stream, not the same one
    assert not np.array_equal(o1["agent_0"], o2["agent_0"])
    e1.close()
    e2.close()


def test_rgb_array_render():
    from sumo_cli.sim.render import gl_available

    ok, why = gl_available()
    if not ok:
        pytest.skip(reason=f"no OpenGL backend for headless rendering: {why}")
    env = parallel_env(body_a="ant", body_b="bug", render_mode="rgb_array", width=160, height=120, shadows=False)
    env.reset(seed=1)
    first = env.render()
    for _ in range(5):
        env.step({a: env.action_space(a).sample() for a in env.agents})
    later = env.render()
    assert first.shape == later.shape == (120, 160, 3) and first.dtype == np.uint8
    assert not np.array_equal(first, later)   # the agents moved
    env.close()
    with pytest.warns(UserWarning, match="render_mode"):
        assert parallel_env().render() is None     # no render_mode: a warning and None
