"""`sumo train --strategy meta` end to end: the meta-learner trains against a stored self-play
agent's consecutive versions, its versions carry the learned step sizes under meta/log_alpha,
resume is exact, and the trained agent plays a game as a meta player."""

from __future__ import annotations

import json
import math

import pytest
import torch

from tests.test_train import TINY, db, final_tensors, rows

META = ["--body", "ant", "--arch", "mlp", "--strategy", "meta", "--opponents", "ant-mlp", "--seed", "3", *TINY]


@pytest.fixture(autouse=True)
def one_torch_thread():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


def _pretrain(cli) -> None:
    code, _, err = cli("train", "--body", "ant", "--arch", "mlp", "--iterations", "2", *TINY)
    assert code == 0, err


def _agent(tmp_path, name: str):
    from sumo_cli.store.library import load_agent

    d = db(tmp_path)
    try:
        return load_agent(d, name)
    finally:
        d.dispose()


def test_meta_training_writes_learned_step_sizes_and_plays_a_game(cli, tmp_path):
    from sumo_cli.compete.game import AgentData, GameSettings, play_game
    from sumo_cli.meta import MetaConfig
    from sumo_cli.adapt.meta_execution import LOG_ALPHA_KEY

    _pretrain(cli)
    code, out, err = cli("train", *META, "--iterations", "2", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["agent"], doc["strategy"], doc["latest_version"]) == ("ant-mlp-meta", "meta", 2)
    its = sorted((i for i in rows(tmp_path)["Iteration"] if i.run_id == 2), key=lambda i: i.iteration)
    assert [i.iteration for i in its] == [1, 2]
    for it in its:
        m = it.metrics
        # task pairs (v, v+1) of the 2-version pool: versions 1 then 2
        assert sorted(m["opponents"]) == ["ant-mlp@1", "ant-mlp@2"]
        # 3 inner steps on fresh episodes, then the post-update phase; the first iteration also measures
        # theta and the crossed updates on the held-out versions (two more phases)
        phases = 6 if it.iteration == 1 else 4
        assert m["iteration_env_steps"] == phases * 2 * 40 and m["meta_tasks"] == 2
        for key in ("loss", "ppo", "vf", "score", "pre_return", "post_return", "update_seconds"):
            assert key in m, key
        heldout = ("heldout_return_adapted", "heldout_return_unadapted", "heldout_gain", "heldout_gain_ci95",
                   "heldout_return_crossed", "heldout_specific_gain", "heldout_specific_gain_ci95",
                   "heldout_won_adapted", "heldout_won_unadapted", "heldout_won_gain", "heldout_won_gain_ci95")
        assert all(key in m for key in heldout) == (it.iteration == 1)
        assert "phases" not in m
    assert [i.env_steps for i in its] == [6 * 80, 10 * 80] and doc["env_steps"] == 10 * 80  # every phase counted
    m = its[0].metrics
    assert m["heldout_gain"] == pytest.approx(m["heldout_return_adapted"] - m["heldout_return_unadapted"])
    # (the gains are means over the tasks of per-task differences, so with a task that finished no
    # episode in one phase they differ from the difference of the mean returns)
    assert math.isfinite(m["heldout_specific_gain"]) and math.isfinite(m["heldout_return_crossed"])
    assert m["heldout_return_adapted"] == pytest.approx(m["post_episode_return"])
    # the games' measure beside it: shares of bouts won, each task's difference averaged
    assert 0 <= m["heldout_won_adapted"] <= 1 and 0 <= m["heldout_won_unadapted"] <= 1
    assert m["heldout_won_gain"] == pytest.approx(m["heldout_won_adapted"] - m["heldout_won_unadapted"])
    init = math.log(MetaConfig().alpha_init)
    shape = (3, 13)  # one step size per inner step and parameter tensor (the MLP has 13)
    for v in (1, 2):
        a = _agent(tmp_path, f"ant-mlp-meta@{v}")
        la = a.meta_params[LOG_ALPHA_KEY]
        assert la.shape == shape
        assert torch.all(torch.exp(la) > 0) and torch.all(la != torch.tensor(init, dtype=la.dtype))
    from safetensors.torch import load_file

    theta0 = load_file(str(tmp_path / "db" / "sumo-checkpoints" / "ant-mlp-meta" / "v00000.safetensors"))
    assert torch.equal(theta0[LOG_ALPHA_KEY], torch.full(shape, init, dtype=theta0[LOG_ALPHA_KEY].dtype))

    code, out, err = cli("runs", "show", "2", "--json")
    assert code == 0, err
    h = json.loads(out)["heldout"]  # one measurement: a mean, no interval over measurements
    assert (h["n"], h["mean"]) == (1, pytest.approx(m["heldout_gain"])) and math.isnan(h["ci95"])
    assert (h["specific"]["n"], h["specific"]["mean"]) == (1, pytest.approx(m["heldout_specific_gain"]))
    code, _, err = cli("runs", "show", "2")
    line = " ".join(err.split())
    assert code == 0 and "meta-update on the held-out next versions: gain" in line
    assert "the part specific to the opponent adapted on" in line

    meta = AgentData.from_loaded(_agent(tmp_path, "ant-mlp-meta@2"))
    assert meta.strategy == "meta"
    opp = AgentData.from_loaded(_agent(tmp_path, "ant-mlp@2"))
    res = play_game(meta, opp, GameSettings(rounds=2, episodes=1, physics="fast"), seed=5)
    assert len(res.rounds) == 2


def test_meta_resume_after_interruption_ends_bit_identical(cli, tmp_path, monkeypatch):
    from sumo_cli.runs import training

    _pretrain(cli)
    args = ["train", *META, "--iterations", "3"]
    assert cli(*args, "--name", "straight")[0] == 0

    def interrupt(p):
        if p.k == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(training, "_after_iteration", interrupt)
    code, _, err = cli(*args, "--name", "bumpy")
    assert code == 130 and "1 of 3 iterations saved" in err
    monkeypatch.setattr(training, "_after_iteration", lambda p: None)
    code, out, err = cli("train", "--resume", "3", "--json")
    assert code == 0, err
    assert json.loads(out)["resumed_from"] == 1

    a, b = final_tensors(tmp_path, "straight"), final_tensors(tmp_path, "bumpy")
    ma, mb = _agent(tmp_path, "straight").meta_params, _agent(tmp_path, "bumpy").meta_params
    assert a.keys() == b.keys() and ma.keys() == mb.keys() == {"meta/log_alpha"}
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert torch.equal(ma["meta/log_alpha"], mb["meta/log_alpha"])
    its = {(i.run_id, i.iteration): i.metrics for i in rows(tmp_path)["Iteration"]}
    for k in range(1, 4):
        assert its[(2, k)]["loss"] == its[(3, k)]["loss"], k
        assert its[(2, k)]["mean_return"] == its[(3, k)]["mean_return"], k


def test_the_learner_state_keeps_an_adapted_outer_learning_rate():
    """A resumed meta run continues with the learning rate its adaptive schedule (outer_kl_lr) had
    reached, not MetaConfig.lr."""
    from sumo_cli.selfplay import meta_selfplay as MS
    from sumo_cli.selfplay import selfplay as SP

    cfg = SP.TrainConfig(body="ant", arch="mlp", strategy="meta", seed=3)
    spec = SP.policy_spec(cfg)
    a = MS.MetaSelfPlayLearner(spec, cfg)
    a.learner.lr = 2.5e-3
    tensors, meta = a.state()
    assert json.loads(json.dumps(meta))["theta_lr"] == 2.5e-3
    b = MS.MetaSelfPlayLearner(spec, cfg)
    assert b.learner.lr == cfg.lr
    b.load_state(tensors, meta)
    assert b.learner.lr == 2.5e-3 and b.learner.opt.param_groups[1]["lr"] == b.meta_cfg.lr_alpha


def test_heldout_every_sets_which_meta_updates_measure(cli, tmp_path):
    _pretrain(cli)
    assert cli("train", *META, "--iterations", "3", "--heldout-every", "2", "--name", "dense")[0] == 0
    code, out, err = cli("runs", "show", "2", "--json")
    assert code == 0, err
    measured = [it["iteration"] for it in json.loads(out)["iterations"] if "heldout_gain" in it["metrics"]]
    assert measured == [1, 2]
    code, _, err = cli("train", *META, "--iterations", "3", "--heldout-every", "0", "--name", "none")
    assert code == 2 and "heldout-every must be at least 1" in err
    code, _, err = cli("train", "--body", "ant", "--heldout-every", "2", *TINY)
    assert code == 2 and "--heldout-every only applies to --strategy meta" in err


def test_the_heldout_measurement_leaves_training_unchanged(cli, tmp_path, monkeypatch):
    from sumo_cli.selfplay import meta_selfplay

    _pretrain(cli)
    assert cli("train", *META, "--iterations", "2", "--name", "measured")[0] == 0
    monkeypatch.setattr(meta_selfplay, "measures_heldout", lambda k, every=10: False)
    assert cli("train", *META, "--iterations", "2", "--name", "unmeasured")[0] == 0
    a, b = final_tensors(tmp_path, "measured"), final_tensors(tmp_path, "unmeasured")
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_the_crossed_control_plays_each_task_against_the_update_of_the_task_before(cli, tmp_path, monkeypatch):
    """The held-out measurement's second phase: task g's opponent against phi adapted on task g - 1,
    from the same bout starts as theta's phase; its episodes are not training data."""
    from sumo_cli.selfplay import meta_selfplay as MS
    from sumo_cli.meta import meta_train

    _pretrain(cli)
    calls, phis = [], []
    real_collect, real_iteration = MS.collect_stacked, MS.meta_iteration

    def collect(env, spec, params, stats, obs, steps, gen):
        calls.append(({k: v.clone() for k, v in params.items()}, obs.copy()))
        return real_collect(env, spec, params, stats, obs, steps, gen)

    def iteration(*a, **kw):
        info, rollouts = real_iteration(*a, **kw)
        if "phi" in info:
            phis.append({k: v.clone() for k, v in info["phi"].items()})
        return info, rollouts

    monkeypatch.setattr(MS, "collect_stacked", collect)
    monkeypatch.setattr(MS, "meta_iteration", iteration)
    assert cli("train", *META, "--iterations", "1")[0] == 0
    assert len(phis) == 1 and len(calls) == 2  # theta's phase, then the crossed one
    (theta_params, theta_obs), (crossed, crossed_obs) = calls
    phi = phis[0]
    assert all(v.shape[0] == 2 for v in phi.values())  # two tasks
    for k, v in phi.items():
        assert torch.equal(crossed[k][0], v[1]) and torch.equal(crossed[k][1], v[0]), k
        assert torch.equal(theta_params[k][0], theta_params[k][1]), k  # theta: one policy for every task
    assert (theta_obs == crossed_obs).all()  # the same bout starts
    assert meta_train.meta_iteration is real_iteration


def test_t_half_width():
    import numpy as np

    from sumo_cli.selfplay.meta_selfplay import t_half_width

    x = np.array([1.0, 2.0, 3.0, np.nan])  # mean 2, sd 1, 3 values: t(2) 4.303
    assert t_half_width(x) == pytest.approx(4.303 / math.sqrt(3))
    assert math.isnan(t_half_width(np.array([1.0])))


def test_alpha_init_sets_where_the_step_sizes_start(cli, tmp_path):
    from safetensors.torch import load_file

    from sumo_cli.adapt.meta_execution import LOG_ALPHA_KEY

    _pretrain(cli)
    code, _, err = cli("train", *META, "--iterations", "1", "--alpha-init", "0.05")
    assert code == 0, err
    theta0 = load_file(str(tmp_path / "db" / "sumo-checkpoints" / "ant-mlp-meta" / "v00000.safetensors"))
    la = theta0[LOG_ALPHA_KEY]
    assert torch.allclose(la, torch.full_like(la, math.log(0.05)))
    assert not torch.allclose(_agent(tmp_path, "ant-mlp-meta@1").meta_params[LOG_ALPHA_KEY], la)  # and they learn
    code, _, err = cli("train", "--body", "ant", "--alpha-init", "0.05", *TINY)
    assert code == 2 and "--alpha-init only applies to --strategy meta" in err
    code, _, err = cli("train", *META, "--alpha-init", "0", "--name", "zero")
    assert code == 2 and "alpha-init must be positive" in err


def test_alpha_init_body_starts_the_tensors_below_the_heads_smaller(cli, tmp_path):
    from safetensors.torch import load_file

    from sumo_cli.adapt.meta_execution import LOG_ALPHA_KEY
    from sumo_cli.nets import policy as P
    from sumo_cli.selfplay.meta_selfplay import is_head

    _pretrain(cli)
    code, _, err = cli("train", *META, "--iterations", "1", "--alpha-init", "0.05", "--alpha-init-body", "0.001")
    assert code == 0, err
    la = load_file(str(tmp_path / "db" / "sumo-checkpoints" / "ant-mlp-meta" / "v00000.safetensors"))[LOG_ALPHA_KEY]
    keys = list(P.param_shapes(_agent(tmp_path, "ant-mlp-meta").spec))
    heads = [is_head(k) for k in keys]
    assert la.shape[1] == len(keys) and 0 < sum(heads) < len(keys)
    for i, head in enumerate(heads):
        assert torch.allclose(la[:, i], torch.full_like(la[:, i], math.log(0.05 if head else 0.001)))
    code, _, err = cli("train", "--body", "ant", "--alpha-init-body", "0.05", *TINY)
    assert code == 2 and "--alpha-init-body only applies to --strategy meta" in err


def test_meta_inner_reuse_adapts_on_thetas_one_batch_as_games_do(cli, tmp_path):
    """--meta-inner reuse: every inner step on the one batch theta collected (two collections per
    iteration, not four), the outer loss on phi^M alone; stored with the run, so resume keeps it."""
    from sumo_cli.selfplay.meta_selfplay import meta_config
    from sumo_cli.selfplay.selfplay import policy_spec
    from sumo_cli.selfplay.train_config import TrainConfig

    _pretrain(cli)
    code, _, err = cli("train", *META, "--iterations", "2", "--meta-inner", "reuse")
    assert code == 0, err
    its = sorted((i for i in rows(tmp_path)["Iteration"] if i.run_id == 2), key=lambda i: i.iteration)
    # theta's batch and the post-update phase; the first iteration adds the two held-out phases
    assert [i.metrics["iteration_env_steps"] for i in its] == [4 * 2 * 40, 2 * 2 * 40]
    run = {r.id: r for r in rows(tmp_path)["Run"]}[2]
    cfg = TrainConfig.from_dict(run.config["train"])
    assert cfg.meta_inner == "reuse"
    m = meta_config(policy_spec(cfg), cfg)
    assert (m.inner_data, m.outer_steps, m.phases) == ("reuse", "last", 2)
    code, _, err = cli("train", *META, "--meta-inner", "both", "--name", "bad")
    assert code == 2 and "meta-inner must be fresh or reuse" in err
    code, _, err = cli("train", "--body", "ant", "--meta-inner", "reuse", *TINY)
    assert code == 2 and "--meta-inner only applies to --strategy meta" in err


def test_the_heldout_summary_is_a_t_interval_over_the_measurements():
    """Mean and 95% t-interval of the measured gains (iterations without a measurement left out),
    the measurements whose own interval lies above or below 0, and the step sizes at both ends."""
    from sumo_cli.selfplay.meta_selfplay import heldout_summary

    a = {"meta_alpha_0": 0.5, "meta_alpha_1": 0.4}
    its = [{**a, "heldout_gain": 10.0, "heldout_gain_ci95": 4.0}, dict(a),
           {**a, "heldout_gain": -2.0, "heldout_gain_ci95": 5.0},
           {"meta_alpha_0": 0.6, "meta_alpha_1": 0.3, "heldout_gain": 22.0, "heldout_gain_ci95": 30.0}]
    h = heldout_summary(its)
    # gains 10, -2, 22: mean 10, sd 12, t(0.975, 2) = 4.303
    assert h["n"] == 3 and h["mean"] == pytest.approx(10.0)
    assert h["ci95"] == pytest.approx(4.303 * 12.0 / math.sqrt(3))
    assert (h["above"], h["below"]) == (1, 0)
    assert h["alpha_first"] == [0.5, 0.4] and h["alpha_last"] == [0.6, 0.3]
    assert h["specific"] is None  # no measurement had the crossed control
    its[0].update(heldout_specific_gain=6.0, heldout_specific_gain_ci95=2.0)
    its[2].update(heldout_specific_gain=-4.0, heldout_specific_gain_ci95=1.0)
    s = heldout_summary(its)["specific"]
    assert (s["n"], s["mean"], s["above"], s["below"]) == (2, pytest.approx(1.0), 1, 1)
    assert s["ci95"] == pytest.approx(12.706 * math.sqrt(50.0) / math.sqrt(2))
    assert heldout_summary(its)["won"] is None  # runs from before the share of bouts won was measured
    its[0].update(heldout_won_gain=0.25, heldout_won_gain_ci95=0.1)
    its[3].update(heldout_won_gain=0.05, heldout_won_gain_ci95=0.1)
    w = heldout_summary(its)["won"]
    assert (w["n"], w["mean"], w["above"], w["below"]) == (2, pytest.approx(0.15), 1, 0)
    from sumo_cli.cli.runs_cmd import heldout_line

    line = heldout_line(heldout_summary(its))
    assert "the share of bouts won +15.0 +- 127.1 points over 2 measurements" in line, line
    assert heldout_summary([dict(a), dict(a)]) is None
