"""Kickstarting (learn.kickstart): the Gaussian KL against torch's, the decaying weight, a PPO
update that moves the policy toward a teacher, an LSTM teacher's means against stepping it, and
`sumo train --teacher` end to end (the teacher pinned to a version, refused when it cannot teach)."""

import json
from pathlib import Path

import pytest
import torch

from benchmarks.toy_envs import PendulumVecEnv
from sumo_cli.ppo import collect as C
from sumo_cli.ppo import kickstart as KS
from sumo_cli.ppo.ppo import PPOConfig, make_optimizer, ppo_update
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets import policy as P
from tests.test_ppo import _gen, _norm_with_data, _randomised
from tests.test_train import TINY, rows


def test_gaussian_kl_is_torchs():
    g = _gen(0)
    mt, ms = torch.randn(5, 3, generator=g, dtype=torch.float64), torch.randn(5, 3, generator=g, dtype=torch.float64)
    lt, ls = torch.randn(3, generator=g, dtype=torch.float64), torch.randn(3, generator=g, dtype=torch.float64)
    Normal = torch.distributions.Normal
    want = torch.distributions.kl_divergence(Normal(mt, lt.exp()), Normal(ms, ls.exp())).sum(-1)
    assert torch.allclose(KS.gaussian_kl(mt, lt, ms, ls), want)
    assert torch.allclose(KS.gaussian_kl(mt, lt, mt, lt), torch.zeros(5, dtype=torch.float64))


def test_coefficient_decays_linearly_to_zero():
    assert [KS.coefficient(k, 2.0, 4) for k in (1, 2, 3, 4, 5, 9)] == [2.0, 1.5, 1.0, 0.5, 0.0, 0.0]
    assert KS.coefficient(1, 1.0, 0) == 0.0


@pytest.mark.parametrize("arch", ["mlp", "lstm"])
def test_update_with_a_teacher_moves_the_policy_toward_it(arch):
    spec = P.PolicySpec(arch, 3, 2, hidden=16)
    env = PendulumVecEnv(4, max_steps=9)
    norm = _norm_with_data(3, 2)
    params = _randomised(spec, 3)
    ro, _ = C.collect(env, spec, params, norm, 30, C.new_carry(env, spec, seed=0), _gen(0))
    teacher_means = torch.full((30, 4, 2), 0.8)
    teacher_logstd = torch.full((2,), -0.5)
    cfg = PPOConfig(epochs=10, num_minibatches=2, lr=3e-3)

    def kl_after(teacher):
        p = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
        stats = ppo_update(spec, p, make_optimizer(p, cfg), ro, norm, cfg, _gen(0), teacher)
        from sumo_cli.ppo.ppo import rollout_inputs

        x = rollout_inputs(spec, ro, norm)
        with torch.no_grad():
            if spec.recurrent:
                means = P.forward_sequence(spec, p, x, ro.state0, ro.resets)[0]
            else:
                means = P.forward(spec, p, x, {})[0]
            return float(KS.gaussian_kl(teacher_means, teacher_logstd, means, p["logstd"]).mean()), stats

    plain, stats0 = kl_after(None)
    taught, stats1 = kl_after((teacher_means, teacher_logstd, 1.0))
    assert "distill_kl" not in stats0 and stats1["distill_kl"] > 0
    assert taught < 0.7 * plain


def _train(cli, *args):
    return cli("train", "--body", "ant", *TINY, *args)


def test_train_with_a_teacher_pins_it_and_logs_the_distillation(cli, tmp_path):
    assert _train(cli, "--arch", "mlp", "--iterations", "1")[0] == 0  # ant-mlp@1: the teacher
    code, out, err = _train(cli, "--arch", "lstm", "--iterations", "2", "--teacher", "ant-mlp",
                            "--teacher-iterations", "1", "--json")
    assert code == 0, err
    run = [r for r in rows(tmp_path)["Run"] if r.id == json.loads(out)["run_id"]][0]
    assert run.config["train"]["teacher"] == "ant-mlp@1"
    its = sorted((i for i in rows(tmp_path)["Iteration"] if i.run_id == run.id), key=lambda i: i.iteration)
    assert its[0].metrics["distill_coef"] == 1.0 and its[0].metrics["distill_kl"] > 0
    assert "distill_kl" not in its[1].metrics  # the weight reached 0: plain PPO


def test_an_lstm_teacher_teaches_an_mlp(cli, tmp_path):
    assert _train(cli, "--arch", "lstm", "--iterations", "1")[0] == 0
    code, out, err = _train(cli, "--arch", "mlp", "--iterations", "1", "--teacher", "ant-lstm", "--json")
    assert code == 0, err
    run = [r for r in rows(tmp_path)["Run"] if r.id == json.loads(out)["run_id"]][0]
    assert run.config["train"]["teacher"] == "ant-lstm@1"
    its = [i for i in rows(tmp_path)["Iteration"] if i.run_id == run.id]
    assert its[0].metrics["distill_kl"] > 0


def test_an_lstm_teachers_means_are_its_step_by_step_actions():
    spec = P.PolicySpec("lstm", 3, 2, hidden=8)
    env = PendulumVecEnv(3, max_steps=7)  # episodes end inside the rollout: the state must be zeroed there
    norm = _norm_with_data(3, 2)
    params = _randomised(spec, 5)
    ro, _ = C.collect(env, spec, params, norm, 20, C.new_carry(env, spec, seed=1), _gen(1))
    assert ro.first[1:].any()
    teacher = KS.Teacher(spec, params, norm.stats)
    got = teacher.means(ro, torch.float64)
    x = nz.normalize(norm.stats, ro.obs.to(torch.float64))
    p64 = {k: v.detach().to(torch.float64) for k, v in params.items()}
    state = P.initial_state(spec, 3, torch.float64)
    for t in range(20):
        state = P.reset_state(state, ro.first[t])
        mean, _, state = P.forward(spec, p64, x[t], state)
        assert torch.allclose(got[t], mean, atol=1e-10)


def test_teachers_that_cannot_teach_are_refused(cli):
    assert _train(cli, "--arch", "lstm", "--strategy", "rl2", "--iterations", "1", "--name", "an-rl2")[0] == 0
    code, _, err = _train(cli, "--arch", "lstm", "--teacher", "an-rl2", "--name", "b")
    assert code == 2 and "a teacher must be an MLP or an LSTM" in err
    assert _train(cli, "--arch", "mlp", "--features", "ego", "--iterations", "1", "--name", "ego-mlp")[0] == 0
    code, _, err = _train(cli, "--arch", "lstm", "--teacher", "ego-mlp", "--name", "d")  # features ego vs none
    assert code == 2 and "has features ego and 133 inputs; this run's ant policy has features none and 120" in err


FIGHT_TINY = ["--envs", "2", "--steps", "40", "--epochs", "2", "--minibatches", "2"]


def _teacher_of(tmp_path, agent):
    run = [r for r in rows(tmp_path)["Run"] if r.config.get("agent") == agent][0]
    return run.config["train"]["teacher"]


def test_the_fight_recipe_kickstarts_an_lstm_from_the_bodys_mlp(cli, tmp_path):
    assert cli("train", "--body", "ant", "--arch", "lstm", "--iterations", "1", "--name", "alone", *FIGHT_TINY)[0] == 0
    assert _teacher_of(tmp_path, "alone") == ""  # no ant-mlp yet
    assert cli("train", "--body", "ant", "--arch", "mlp", "--iterations", "1", *FIGHT_TINY)[0] == 0
    assert _teacher_of(tmp_path, "ant-mlp") == ""  # an MLP has no teacher
    assert cli("train", "--body", "ant", "--arch", "lstm", "--iterations", "1", "--name", "taught", *FIGHT_TINY)[0] == 0
    assert _teacher_of(tmp_path, "taught") == "ant-mlp@1"
    code, _, err = cli("train", "--body", "ant", "--arch", "lstm", "--iterations", "1", "--name", "untaught",
                       "--teacher", "none", *FIGHT_TINY)
    assert code == 0, err
    assert _teacher_of(tmp_path, "untaught") == ""
    assert cli("train", "--body", "bug", "--arch", "lstm", "--iterations", "1", "--name", "a-bug", *FIGHT_TINY)[0] == 0
    assert _teacher_of(tmp_path, "a-bug") == ""  # no bug-mlp


def test_the_fight_recipe_kickstarts_a_spider_mlp_from_the_spider_lstm(cli, tmp_path, monkeypatch):
    """The Spider MLP passes its bars only when the Spider LSTM teaches it (docs/lab-record.md), so the
    recipe gives a Spider MLP the body's LSTM as its teacher; other bodies' MLPs learn alone."""
    from sumo_cli.store.shipped import read_manifest

    monkeypatch.setenv("SUMO_POLICIES", str(Path(__file__).resolve().parents[1] / "policies"))
    tiny = [*FIGHT_TINY, "--iterations", "1"]
    tiny_spider = [*tiny[2:], "--envs", "3"]  # a bout slot for each body of the Spider's pool
    assert cli("train", "--body", "spider", "--arch", "mlp", "--name", "taught-spider", *tiny_spider)[0] == 0
    default = {a.name: a.default_version for a in read_manifest(Path(__file__).resolve().parents[1] / "policies")}
    assert _teacher_of(tmp_path, "taught-spider") == f"spider-lstm@{default['spider-lstm']}"  # the shipped default
    assert cli("train", "--body", "spider", "--arch", "lstm", "--name", "taught-spider-lstm", *tiny_spider)[0] == 0
    assert _teacher_of(tmp_path, "taught-spider-lstm") == f"spider-mlp@{default['spider-mlp']}"
    assert cli("train", "--body", "ant", "--arch", "mlp", "--name", "lone-ant", *tiny)[0] == 0
    assert _teacher_of(tmp_path, "lone-ant") == ""


@pytest.mark.parametrize("arch", ["mlp", "lstm"])
def test_a_meta_learners_distillation_term_is_the_kl_to_its_teacher_step_by_step(arch):
    """meta_train.distillation: coef x KL(teacher || pi_theta) averaged over theta's rollout, theta
    stepped as it acted (the frozen statistics, the state zeroed at episode starts); its gradient
    reaches theta."""
    from sumo_cli.meta.meta_train import distillation

    spec = P.PolicySpec(arch, 3, 2, hidden=8)
    env = PendulumVecEnv(3, max_steps=7)
    norm = _norm_with_data(3, 2)
    params = _randomised(spec, 5)
    ro, _ = C.collect(env, spec, params, norm, 20, C.new_carry(env, spec, seed=1), _gen(1))
    teacher_means, teacher_logstd = torch.randn(20, 3, 2, generator=_gen(2)), torch.full((2,), -0.3)
    theta = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
    loss = distillation(spec, norm.stats, teacher_means, teacher_logstd, 0.7, ro)(theta)
    x = nz.normalize(norm.stats, ro.obs)
    state, kls = P.initial_state(spec, 3), []
    with torch.no_grad():
        for t in range(20):
            state = P.reset_state(state, ro.first[t])
            mean, _, state = P.forward(spec, params, x[t], state)
            kls.append(KS.gaussian_kl(teacher_means[t], teacher_logstd, mean, params["logstd"]))
    assert float(loss.detach()) == pytest.approx(0.7 * float(torch.stack(kls).mean()), rel=1e-5)
    loss.backward()
    assert all(v.grad is not None and bool(v.grad.abs().sum() > 0) for k, v in theta.items() if not k.startswith("vf/"))


def test_a_kickstarted_meta_learner_pins_its_teacher_and_logs_the_distillation(cli, tmp_path):
    meta = ["--strategy", "meta", "--opponents", "ant-mlp", "--seed", "3"]
    assert _train(cli, "--arch", "mlp", "--iterations", "2")[0] == 0  # ant-mlp@2: the teacher and the opponent
    code, out, err = _train(cli, "--arch", "mlp", *meta, "--iterations", "2", "--teacher", "ant-mlp",
                            "--teacher-iterations", "2", "--teacher-coef", "2", "--json")
    assert code == 0, err
    run = [r for r in rows(tmp_path)["Run"] if r.id == json.loads(out)["run_id"]][0]
    assert run.config["train"]["teacher"] == "ant-mlp@2"
    its = sorted((i for i in rows(tmp_path)["Iteration"] if i.run_id == run.id), key=lambda i: i.iteration)
    assert [i.metrics["distill_coef"] for i in its] == [2.0, 1.0]
    assert all(i.metrics["distill_kl"] > 0 for i in its)


@pytest.mark.parametrize("arch", ["mlp", "lstm"])
def test_a_meta_learners_distillation_phase_moves_theta_toward_its_teacher_and_leaves_the_step_sizes(arch):
    from sumo_cli import meta as ML
    from sumo_cli.meta.meta_train import distillation

    spec = P.PolicySpec(arch, 3, 2, hidden=8)
    env = PendulumVecEnv(4, max_steps=9)
    norm = _norm_with_data(3, 2)
    params = _randomised(spec, 3)
    ro, _ = C.collect(env, spec, params, norm, 30, C.new_carry(env, spec, seed=0), _gen(0))
    learner = ML.MetaLearner(ML.GaussianModel(spec), params, ML.MetaConfig(lr=3e-3))
    alpha = learner.log_alpha.detach().clone()
    loss_of = distillation(spec, norm.stats, torch.full((30, 4, 2), 0.8), torch.full((2,), -0.5), 1.0, ro)
    with torch.no_grad():
        before = float(loss_of(learner.theta))
    learner.distill(loss_of, 4, epochs=40, minibatches=2, generator=_gen(1))
    with torch.no_grad():
        after = float(loss_of(learner.theta))
    assert after < 0.5 * before
    assert torch.equal(learner.log_alpha.detach(), alpha)
    assert all(torch.equal(learner.theta[k].detach(), params[k]) for k in params if k.startswith("vf/"))
