"""The meta-gradient estimator against the exact meta-gradient, by exhaustive enumeration.

A two-armed Bernoulli bandit whose arm probabilities change from task T_i to T_{i+1}; a tabular
softmax policy (plus a scalar value "net", adapted by the inner value-regression term) plugged into
the *same* estimator code as the real policies (:func:`sumo_cli.meta.meta_loss`). Every
pre-update batch and every post-adaptation trajectory is enumerated with its probability, so the
probability-weighted mean of the per-sample estimator is computed exactly and must equal the
gradient of the exactly computed meta-objective

    J(theta, alpha) = sum_D P(D | theta) sum_tau P(tau | phi(theta, alpha, D)) r(tau)

to rounding. Without the score-function term of the pre-update trajectories it must not (the
regression test that keeps the term wired in).
"""

import itertools
import math

import numpy as np
import pytest
import torch

from sumo_cli import meta as ML
from sumo_cli.nets import policy as P

DT = torch.float64


pytestmark = pytest.mark.usefixtures("one_torch_thread")

P_PRE = torch.tensor([0.8, 0.3], dtype=DT)  # arm success probabilities in T_i
P_POST = torch.tensor([0.65, 0.45], dtype=DT)  # ... in T_{i+1}


class TabularBandit:
    """Softmax over 2 arms (``logits``) and a constant value estimate ``v``; actions are stored as
    a float arm index in ``batch.actions[..., 0]``."""

    def param_shapes(self):
        return {"logits": (2,), "v": (1,)}

    def log_probs(self, params):
        return torch.log_softmax(params["logits"], -1)

    def evaluate(self, params, batch):
        lsm = self.log_probs(params)  # (*G, 2)
        a = batch.actions[..., 0].long()  # (T, *G, N)
        n_agent = lsm.dim() - 1
        lsm_b = lsm.reshape(1, *lsm.shape[:-1], 1, 2).expand(*a.shape, 2)
        lp = torch.gather(lsm_b, -1, a.unsqueeze(-1)).squeeze(-1)
        v = params["v"][..., 0].reshape(1, *params["v"].shape[:n_agent], 1).expand_as(lp)
        return lp, v

    def entropy(self, params):
        lsm = self.log_probs(params)
        return -(lsm.exp() * lsm).sum(-1)


def _batch(actions, rewards, logp=None):
    """(T=1, G, N) batch of one-step episodes."""
    a = torch.as_tensor(actions, dtype=DT)
    r = torch.as_tensor(rewards, dtype=DT)
    T1 = (1, *a.shape)
    z = torch.zeros(T1, dtype=DT)
    return ML.TrajBatch(
        x=torch.zeros(*T1, 1, dtype=DT),
        actions=a.reshape(*T1, 1),
        logp=z.clone() if logp is None else logp.reshape(T1),
        values=z.clone(),
        returns=r.reshape(T1),
        adv=r.reshape(T1),  # stored value 0: the baseline is 0
        first=torch.ones(T1, dtype=torch.bool),
        mask=torch.ones(T1, dtype=torch.bool),
    )


def _outcomes(n):
    """All (arms, rewards) of n independent pulls: lists of tuples."""
    return list(itertools.product(itertools.product((0, 1), repeat=n), itertools.product((0, 1), repeat=n)))


def _prob(logits, arms, rewards, p):
    """P(arms, rewards | softmax(logits), arm probabilities p); logits (*G, 2), arms/rewards (G, n)."""
    lsm = torch.log_softmax(logits, -1)
    a = torch.as_tensor(arms)
    r = torch.as_tensor(rewards, dtype=DT)
    lpa = torch.gather(lsm, -1, a)
    pr = p[a]
    return torch.exp(lpa.sum(-1)) * torch.prod(torch.where(r > 0, pr, 1 - pr), -1)


def _setup(cfg_kw):
    model = TabularBandit()
    theta = {"logits": torch.tensor([0.3, -0.2], dtype=DT, requires_grad=True), "v": torch.tensor([0.1], dtype=DT, requires_grad=True)}
    cfg = ML.MetaConfig.paper(
        normalize_adv=False, vf_coef=0.0, score_baseline="none", inner_vf_coef=1.0, alpha_init=0.5, **cfg_kw
    )
    log_alpha = torch.log(torch.tensor([0.9, 0.4, 0.6], dtype=DT)).requires_grad_(True)
    return model, theta, cfg, log_alpha


def _enumerate(mode, K, n_post):
    """Combinations (pre batches, post pulls) as task lists."""
    n_batches = 3 if mode == "fresh" else 1
    pre_sets = list(itertools.product(_outcomes(K), repeat=n_batches))
    post_set = _outcomes(n_post)
    combos = list(itertools.product(pre_sets, post_set))
    pre = [
        _batch([c[0][m][0] for c in combos], [c[0][m][1] for c in combos]) for m in range(n_batches)
    ]
    post_arms = torch.tensor([c[1][0] for c in combos])
    post_rew = torch.tensor([c[1][1] for c in combos], dtype=DT)
    pre_arms = [torch.tensor([c[0][m][0] for c in combos]) for m in range(n_batches)]
    pre_rew = [torch.tensor([c[0][m][1] for c in combos], dtype=DT) for m in range(n_batches)]
    return pre, pre_arms, pre_rew, post_arms, post_rew, len(combos)


def _exact_and_estimate(mode, score_term, K=2, n_post=1):
    model, theta, cfg, log_alpha = _setup({"inner_data": mode, "score_term": score_term, "clip_value": None})
    pre, pre_arms, pre_rew, post_arms, post_rew, G = _enumerate(mode, K, n_post)
    batches = pre if mode == "fresh" else pre[0]

    # exact objective J (differentiable): probability of each combination's pre batches times the
    # expected post reward given phi; each combination appears once per post outcome, so divide.
    tr = ML.adapt_trace(model, theta, log_alpha, batches, cfg, create_graph=True, behaviour="theta")
    p_pre = _prob(theta["logits"].expand(G, 2), pre_arms[0], pre_rew[0], P_PRE)
    for m in range(1, len(pre_arms)):
        p_pre = p_pre * _prob(tr.phis[m]["logits"], pre_arms[m], pre_rew[m], P_PRE)
    pi_phi = torch.softmax(tr.phi["logits"], -1)
    exp_r = (pi_phi * P_POST).sum(-1)  # E[r | phi] for one pull
    n_post_outcomes = 4**n_post
    J = (p_pre * exp_r).sum() / n_post_outcomes
    exact = torch.autograd.grad(J, [theta["logits"], log_alpha])

    # estimator: per-combination meta_loss gradient, weighted by the combination's probability
    with torch.no_grad():
        phi = tr.phi
        lsm = torch.log_softmax(phi["logits"], -1)
        post_logp = torch.gather(lsm, -1, post_arms)  # behaviour = pi_phi at the current theta: ratio 1
        w = p_pre * _prob(phi["logits"], post_arms, post_rew, P_POST)
    post = _batch(post_arms.to(DT), post_rew, post_logp)
    out = ML.meta_loss(model, theta, log_alpha, batches, post, cfg, task_weights=w.detach())
    est = torch.autograd.grad(out.loss, [theta["logits"], log_alpha])
    assert math.isclose(float(w.sum()), 1.0, rel_tol=1e-12)
    return [-e for e in exact], list(est), float(J.detach())


@pytest.mark.parametrize("mode", ["reuse", "fresh"])
def test_estimator_mean_equals_exact_meta_gradient(mode):
    exact, est, J = _exact_and_estimate(mode, score_term=True)
    for e, s in zip(exact, est):
        torch.testing.assert_close(s, e, rtol=1e-9, atol=1e-10)
    assert exact[1].abs().min() > 1e-4  # the alpha gradients are not zero


@pytest.mark.parametrize("mode", ["reuse", "fresh"])
def test_estimator_without_score_term_is_biased(mode):
    exact, est, _ = _exact_and_estimate(mode, score_term=False)
    err = max(float((s - e).abs().max() / e.abs().max()) for s, e in zip(est, exact))
    assert err > 0.05, f"dropping the score term should bias the estimate (relative error {err:.3g})"


def test_estimator_with_two_post_pulls_and_clipped_steps():
    """Several post-adaptation samples per task and an active step clip (the estimator is the
    gradient of the clipped rule)."""
    model, theta, cfg, log_alpha = _setup({"inner_data": "reuse", "clip_value": 0.15, "clip_mode": "step"})
    # re-run the generic helper with these settings
    pre, pre_arms, pre_rew, post_arms, post_rew, G = _enumerate("reuse", 2, 2)
    tr = ML.adapt_trace(model, theta, log_alpha, pre[0], cfg, create_graph=True, behaviour="theta")
    p_pre = _prob(theta["logits"].expand(G, 2), pre_arms[0], pre_rew[0], P_PRE)
    exp_r = (torch.softmax(tr.phi["logits"], -1) * P_POST).sum(-1)
    J = (p_pre * exp_r).sum() / 16
    exact = [-g for g in torch.autograd.grad(J, [theta["logits"], log_alpha])]
    with torch.no_grad():
        lsm = torch.log_softmax(tr.phi["logits"], -1)
        post_logp = torch.gather(lsm, -1, post_arms)
        w = p_pre * _prob(tr.phi["logits"], post_arms, post_rew, P_POST)
    post = _batch(post_arms.to(DT), post_rew, post_logp)
    out = ML.meta_loss(model, theta, log_alpha, pre[0], post, cfg, task_weights=w)
    est = torch.autograd.grad(out.loss, [theta["logits"], log_alpha])
    for e, s in zip(exact, est):
        torch.testing.assert_close(s, e, rtol=1e-9, atol=1e-10)


# ----------------------------------------------------------------------------------------------
# the real Gaussian MLP policy, integrated by Gauss-Hermite quadrature


def _grads(out, params):
    gs = torch.autograd.grad(out, params, allow_unused=True)
    return torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1) for p, g in zip(params, gs)])


def _gaussian_bandit(n_pre_nodes, score_term, K=2, n_post_nodes=20, alphas=(0.05, 0.03, 0.04)):
    """A one-dimensional continuous bandit (constant observation), reward exp(-(a - c)^2 / 2) with
    c = 0.7 in T_i and 1.0 in T_{i+1}; the policy is the project's Gaussian MLP. K pre-update
    actions and one post-adaptation action are integrated with Gauss-Hermite nodes (the nodes of
    all combinations are the tasks of one batched meta_loss call, weighted by their quadrature
    weights). The exact objective integrates the post reward in closed form and the pre actions by
    the same quadrature, reparametrised a = mu_theta + sigma_theta z, and is differentiated by
    autograd."""
    c_pre, c_post = 0.7, 1.0
    spec = P.PolicySpec("mlp", obs_dim=1, act_dim=1, hidden=3)
    g = torch.Generator().manual_seed(3)
    th = {k: (v + 0.3 * torch.randn(v.shape, dtype=DT, generator=g)) for k, v in P.init_params(spec, g, DT).items()}
    th["logstd"] = torch.full_like(th["logstd"], -0.5)
    th = {k: v.requires_grad_(True) for k, v in th.items()}
    model = ML.GaussianModel(spec)
    cfg = ML.MetaConfig.paper(normalize_adv=False, vf_coef=0.0, score_baseline="none", clip_value=None, score_term=score_term)
    la = torch.log(torch.tensor(alphas, dtype=DT)).requires_grad_(True)
    params = list(th.values()) + [la]

    def nodes(n):
        z, w = np.polynomial.hermite_e.hermegauss(n)
        return torch.tensor(z, dtype=DT), torch.tensor(w / w.sum(), dtype=DT)

    z, w = nodes(n_pre_nodes)
    zp, wp = nodes(n_post_nodes)
    grid = torch.meshgrid(*([torch.arange(n_pre_nodes)] * K), torch.arange(n_post_nodes), indexing="ij")
    idx = [t.reshape(-1) for t in grid]
    G = idx[0].numel()
    mu, _, _ = P.forward(spec, th, torch.ones(1, 1, dtype=DT), {})
    sd = th["logstd"].exp()
    a_pre = torch.stack([mu.reshape(()) + sd.reshape(()) * z[idx[k]] for k in range(K)], -1)  # (G, K)
    r_pre = torch.exp(-0.5 * (a_pre - c_pre) ** 2)

    def batch(a, r, logp):
        shp = (1, *a.shape)
        zeros = torch.zeros(shp, dtype=DT)
        return ML.TrajBatch(
            x=torch.ones(*shp, 1, dtype=DT), actions=a.reshape(*shp, 1), logp=logp.reshape(shp), values=zeros,
            returns=r.reshape(shp), adv=r.reshape(shp), first=torch.ones(shp, dtype=torch.bool),
            mask=torch.ones(shp, dtype=torch.bool),
        )

    w_pre = torch.ones(G, dtype=DT)
    for k in range(K):
        w_pre = w_pre * w[idx[k]]
    w_all = w_pre * wp[idx[K]]
    pre = batch(a_pre, r_pre, torch.zeros(G, K, dtype=DT))
    tr = ML.adapt_trace(model, th, la, pre, cfg, create_graph=True, behaviour="theta")
    mu_phi, _, _ = P.forward(spec, tr.phi, torch.ones(G, 1, 1, dtype=DT), {})
    mu_phi, sd_phi = mu_phi.reshape(G), tr.phi["logstd"].exp().reshape(G)
    s2 = 1 + sd_phi**2
    expected_post = torch.exp(-0.5 * (mu_phi - c_post) ** 2 / s2) / torch.sqrt(s2)
    exact = -_grads((w_all * expected_post).sum(), params)

    with torch.no_grad():
        a_post = mu_phi + sd_phi * zp[idx[K]]
        lp_post = P.log_prob(mu_phi.reshape(G, 1, 1), tr.phi["logstd"].reshape(G, 1), a_post.reshape(G, 1, 1)).reshape(G, 1)
    post = batch(a_post.reshape(G, 1), torch.exp(-0.5 * (a_post - c_post) ** 2).reshape(G, 1), lp_post)
    out = ML.meta_loss(model, th, la, pre.map(lambda t: t.detach()), post, cfg, task_weights=w_all)
    return exact, _grads(out.loss, params)


@pytest.mark.slow
def test_gaussian_policy_estimator_matches_quadrature_meta_gradient():
    exact, est = _gaussian_bandit(48, score_term=True)
    scale = float(exact.abs().max())
    assert float((est - exact).abs().max()) < 1e-8 * max(1.0, scale)
    exact0, est0 = _gaussian_bandit(48, score_term=False)
    torch.testing.assert_close(exact0, exact)
    assert float((est0 - exact).norm() / exact.norm()) > 0.1


@pytest.mark.parametrize("outer_steps", ["all", "post"])
def test_estimator_of_the_multi_step_objective_equals_its_exact_gradient(outer_steps):
    """MAML-style consecutive steps with the multi-step outer objective: the mean of the returns of
    phi^1 .. phi^M ("post"; "all" adds theta's own), phi^m's return measured on the batch it sampled
    (which step m+1 then adapts on). Every pre-update batch changes the returns of all later
    steps, so its score term must carry each of them, not only phi^M's."""
    model, theta, cfg, log_alpha = _setup({"inner_data": "fresh", "clip_value": None, "outer_steps": outer_steps})
    pre, pre_arms, pre_rew, post_arms, post_rew, G = _enumerate("fresh", 2, 1)
    M, first = cfg.num_steps, cfg.outer_from
    tr = ML.adapt_trace(model, theta, log_alpha, pre, cfg, create_graph=True, behaviour="theta")
    p_pre = _prob(theta["logits"].expand(G, 2), pre_arms[0], pre_rew[0], P_PRE)
    for m in range(1, M):
        p_pre = p_pre * _prob(tr.phis[m]["logits"], pre_arms[m], pre_rew[m], P_PRE)
    # phi^m's return (m < M): the mean reward of the batch it sampled; phi^M's: its expected post reward
    returns = [pre_rew[m].mean(-1) for m in range(first, M)] + [(torch.softmax(tr.phi["logits"], -1) * P_POST).sum(-1)]
    J = (p_pre * sum(returns) / len(returns)).sum() / 4
    exact = [-g for g in torch.autograd.grad(J, [theta["logits"], log_alpha])]
    with torch.no_grad():
        lsm = torch.log_softmax(tr.phi["logits"], -1)
        post_logp = torch.gather(lsm, -1, post_arms)
        w = p_pre * _prob(tr.phi["logits"], post_arms, post_rew, P_POST)
        # the outer targets: the pre batches with the log-probs of the policies that sampled them
        targets = [_batch(pre_arms[m].to(DT), pre_rew[m], torch.gather(torch.log_softmax(tr.phis[m]["logits"], -1).expand(G, 2), -1, pre_arms[m]))
                   for m in range(first, M)]
    post = _batch(post_arms.to(DT), post_rew, post_logp)
    mids = [(b, ML.adv_stats_of(b)) for b in targets]
    out = ML.meta_loss(model, theta, log_alpha, pre, post, cfg, task_weights=w, mids=mids)
    est = torch.autograd.grad(out.loss, [theta["logits"], log_alpha])
    for e, s in zip(exact, est):
        torch.testing.assert_close(s, e, rtol=1e-9, atol=1e-10)
