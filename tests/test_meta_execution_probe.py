"""benchmarks/meta_execution_probe.py: its rules parse as documented, and the training-reward patch
hands adaptation alpha x the shaped dense reward + (1 - alpha) x the sparse one, leaving the bouts
themselves (observations, outcomes) as they were."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.meta_execution_probe import parse_rule, trained_reward
from sumo_cli.selfplay.sumo_vec import Shaping
from sumo_cli.sim.sumo_env import BatchedSumo


def test_rules_parse_as_documented():
    assert parse_rule("none") == ("none", None, None, None, 1.0)
    assert parse_rule("paper:6") == ("paper", 6, None, None, 1.0)
    assert parse_rule("paper:6:1:none:0.1") == ("paper", 6, 1, "none", 0.1)
    with pytest.raises(SystemExit):
        parse_rule("adam:6")


def _bouts(steps: int, seed: int) -> list:
    env = BatchedSumo("ant", "bug", 2, physics="fast", seed=seed, auto_reset=False, n_threads=1)
    rng = np.random.default_rng(seed)
    try:
        out = [env.reset(seed=seed)[0]]
        for _ in range(steps):
            out.append(env.step(rng.uniform(-1, 1, (2, env.spec_a.n_actions)),
                                rng.uniform(-1, 1, (2, env.spec_b.n_actions))))
        return out
    finally:
        env.close()


def test_training_reward_patch_rescales_what_adaptation_sees():
    shaping = Shaping(control=0.02, push=0.0, move=0.0, approach=5.0, push_out=5.0)
    faithful = _bouts(40, seed=3)
    with trained_reward(0.9, shaping):
        patched = _bouts(40, seed=3)
    assert np.array_equal(faithful[0], patched[0])
    before = faithful[0]
    for f, p in zip(faithful[1:], patched[1:]):
        np.testing.assert_array_equal(f.obs_a, p.obs_a)
        np.testing.assert_array_equal(f.outcome, p.outcome)
        np.testing.assert_allclose(p.dense_a, 0.9 * shaping.dense(f, before))
        np.testing.assert_allclose(p.sparse_a, 0.1 * f.sparse_a)
        np.testing.assert_array_equal(f.dense_b, p.dense_b)
        before = f.obs_a
    assert not np.allclose([p.dense_a for p in patched[1:]], [f.dense_a for f in faithful[1:]])
