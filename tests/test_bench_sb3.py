"""`sumo bench train --sb3`: the Gymnasium env SB3 learns on behaves exactly like our trainer's env,
passes Gymnasium's checker, and the comparison reports positive figures and ratios computed from
them (never a speed target: timings depend on the machine)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from sumo_cli.bench import sb3_compare as SC  # noqa: E402
from sumo_cli.selfplay.sumo_vec import OpponentPolicy, SumoVecEnv  # noqa: E402


def _policy_opponent() -> OpponentPolicy:
    """A stored MLP policy (freshly initialised, empty observation statistics) as the opponent."""
    import torch

    from sumo_cli.nets import normalizer as nz
    from sumo_cli.nets import policy as P

    spec = P.PolicySpec("mlp", 120, 8)
    params = P.init_params(spec, torch.Generator().manual_seed(1))
    return OpponentPolicy("ant-mlp@0", "ant", spec.to_dict(), {k: v.numpy() for k, v in params.items()},
                          nz.new_stats(120, backend="numpy"))


@pytest.mark.filterwarnings("ignore:.*Box observation space m.* value is .*infinity")
def test_gym_env_passes_check_env():
    from gymnasium.utils.env_checker import check_env

    env = SC.SumoSingleEnv("ant")
    try:
        check_env(env, skip_render_check=True)
        assert env.observation_space.shape == (120,) and env.action_space.shape == (8,)
    finally:
        env.close()


@pytest.mark.parametrize("opponent", ["motionless", "policy"])
def test_gym_env_equals_sumo_vec_env(opponent):
    """Same seed and actions: the same observations, rewards, terminations and truncations as
    SumoVecEnv with one bout, across bout ends (reset() continues with the env's next bout)."""
    opp = OpponentPolicy.motionless("ant") if opponent == "motionless" else _policy_opponent()
    gym_env = SC.SumoSingleEnv("ant", opponent=opp, alpha=0.7)
    ref = SumoVecEnv("ant", "ant", 1, [] if opp.is_motionless else [opp],
                     motionless_prob=1.0 if opp.is_motionless else 0.0, alpha=0.7)
    try:
        obs, _ = gym_env.reset(seed=7)
        ref_obs = ref.reset(seed=7)
        np.testing.assert_array_equal(obs, ref_obs[0])
        rng = np.random.default_rng(0)
        ends = 0
        for _ in range(160):
            a = rng.uniform(-1, 1, 8).astype(np.float32)
            obs, r, term, trunc, info = gym_env.step(a)
            out = ref.step(a[None].astype(np.float64))
            assert r == out.reward[0]
            assert (term, trunc) == (bool(out.terminated[0]), bool(out.truncated[0]))
            np.testing.assert_array_equal(obs, out.final_obs[0])
            assert gym_env.observation_space.contains(obs)
            if term or trunc:
                ends += 1
                assert info["length"] == ref.episodes[-1].length
                obs, _ = gym_env.reset()
                np.testing.assert_array_equal(obs, out.obs[0])
        assert ends >= 1  # random actions ring the ant out within a few dozen steps
    finally:
        gym_env.close()
        ref.close()


def test_gym_env_reset_seed_is_deterministic():
    env = SC.SumoSingleEnv("ant")
    try:
        a, _ = env.reset(seed=3)
        env.step(np.zeros(8, dtype=np.float32))
        b, _ = env.reset(seed=3)
        np.testing.assert_array_equal(a, b)
    finally:
        env.close()


def test_round_steps():
    assert SC.round_steps(1, 4096, 4096) == 4096
    assert SC.round_steps(50000, 4096, 4096) == 53248
    assert SC.round_steps(4096, 4096, 2048) == 4096


def test_bench_train_sb3_without_sb3_says_how_to_install(cli, monkeypatch):
    monkeypatch.setattr(SC, "sb3_available", lambda: False)
    code, out, err = cli("bench", "train", "--sb3", "--quick")
    assert code == 2 and out == ""
    assert "pip install" in err and "stable-baselines3" in err


def test_bench_train_rejects_bad_arguments(cli):
    code, _, err = cli("bench", "train", "--archs", "mlp,gru")
    assert code == 2 and "gru" in err
    code, _, err = cli("bench", "train", "--sb3", "--steps", "0")
    assert code == 2 and "--steps" in err


@pytest.mark.slow
def test_bench_train_sb3_quick(cli):
    pytest.importorskip("stable_baselines3")
    code, out, err = cli("bench", "train", "--sb3", "--quick", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["setup"]["quick"] and doc["setup"]["physics"] == "faithful" and doc["setup"]["body"] == "ant"
    steps = doc["setup"]["steps"]
    assert doc["ours"]["steps"] == steps and doc["sb3"]["steps"] >= steps
    ours, sb3, raw = doc["ours"]["steps_per_second"], doc["sb3"]["steps_per_second"], doc["raw"]["steps_per_second"]
    for v in (ours, sb3, raw, doc["ours"]["rollout_steps_per_second"]):
        assert isinstance(v, float) and math.isfinite(v) and v > 0
    assert doc["ours_over_sb3"] == pytest.approx(ours / sb3, rel=2e-3)
    assert doc["ours_over_raw"] == pytest.approx(ours / raw, rel=2e-3)
    hp = doc["sb3"]["hyper_parameters"]
    assert (hp["n_steps"], hp["batch_size"], hp["n_epochs"]) == (2048, 64, 10)
    assert doc["sb3"]["vec_env"] == "SubprocVecEnv x2" and doc["ours"]["update_seconds"] > 0
    assert "ours/SB3" in err and doc["machine"]["cpu"]["model"]
