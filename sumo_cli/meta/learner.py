"""The outer objective (Algorithm 1): PPO on the post-adaptation trajectories through the
adaptation, the score-function term, and :class:`MetaLearner` that optimises theta and alpha."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import torch
from torch import Tensor

from sumo_cli.meta.config import MetaConfig, Params
from sumo_cli.meta.batch import TrajBatch
from sumo_cli.meta.model import as_model, init_log_alpha
from sumo_cli.meta.adaptation import adapt, adapt_trace, segments


def _per_agent_mean(x: Tensor, mask: Tensor) -> Tensor:
    T, N = x.shape[0], x.shape[-1]
    xf = torch.where(mask, x, torch.zeros_like(x)).reshape(T, -1, N).sum((0, 2))
    return xf / mask.reshape(T, -1, N).sum((0, 2)).clamp_min(1).to(x.dtype)


def post_returns(post: TrajBatch) -> tuple[Tensor, Tensor]:
    """Per agent ``(Gf,)``: the mean return from the start of the post-adaptation episodes (the
    ``returns`` target at each trajectory start that begins an episode; all trajectory starts if
    none does) and the mean trajectory length (valid steps / number of trajectories)."""
    seg = segments(post.first, post.mask)
    Gf = seg.valid.shape[0]
    g_idx = torch.arange(Gf).reshape(Gf, 1).expand_as(seg.start_t)
    T, N = post.num_steps, post.num_cols
    ret0 = post.returns.reshape(T, -1, N)[seg.start_t, g_idx, seg.start_n]  # (Gf, S)
    use = torch.where(seg.starts_episode.any(-1, keepdim=True), seg.starts_episode, seg.valid)
    R = (ret0 * use).sum(-1) / use.sum(-1).clamp_min(1)
    Lbar = seg.n_steps.to(ret0.dtype) / seg.K.clamp_min(1).to(ret0.dtype)
    return R, Lbar


def _ppo_terms(model, phi: Params, post: TrajBatch, cfg: MetaConfig, adv_stats, task_weights) -> tuple[Tensor, Tensor, Tensor]:
    """(PPO surrogate loss, value loss, entropy) of ``phi`` on a batch it sampled, averaged over tasks."""
    lp, v = model.evaluate(phi, post)
    mask = post.mask
    adv = (post.adv - adv_stats[0]) / adv_stats[1] if cfg.normalize_adv else post.adv
    ratio = torch.exp(lp - post.logp)
    surr = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - cfg.ppo_clip, 1 + cfg.ppo_clip) * adv)
    per_agent = _per_agent_mean(surr, mask)
    tw = torch.full_like(per_agent, 1.0 / per_agent.numel()) if task_weights is None else (task_weights / task_weights.sum()).to(per_agent.dtype)
    ent = (tw * model.entropy(phi).reshape(-1)).sum() if cfg.ent_coef else torch.zeros((), dtype=lp.dtype)
    return -(tw * per_agent).sum(), 0.5 * (tw * _per_agent_mean((v - post.returns) ** 2, mask)).sum(), ent


def _loo(R: Tensor) -> Tensor:
    """Leave-one-out baseline: for every task, the mean of the other tasks' returns (0 with one task)."""
    return (R.sum() - R) / (R.numel() - 1) if R.numel() > 1 else torch.zeros_like(R)


def _score_coef(R: Tensor, Lbar: Tensor, sigma: Tensor, baseline: Tensor, cfg: MetaConfig) -> Tensor:
    """``c = score_coef (R - b) / (Lbar sigma)`` per task: the weight of a return in the score term, on
    the scale of the PPO term of the policy that earned it (mean over ``Lbar`` steps per episode,
    advantages divided by ``sigma``)."""
    return (cfg.score_coef * (R - baseline) / (Lbar * sigma)).detach()


def _score_term(slps: list[Tensor], cs: list[Tensor], first: int, tw: Tensor) -> Tensor:
    """The score-function term of the pre-update batches for an objective that is the mean of the
    returns of phi^first .. phi^M (``cs[k]``: the coefficient of phi^(first+k)'s return). Batch i
    (sampled by phi^i, used by step i+1) changes phi^(i+1) .. phi^M, so its log-probability
    ``slps[i]`` is weighted by ``(1/J) sum_{j >= max(i+1, first)} c_j`` over the J terms. With one
    term (``first = M``) every batch carries phi^M's return; R_0 (theta's own return, "all") is no
    batch's score: its PPO term is already on-policy."""
    M, J = first + len(cs) - 1, len(cs)
    score = torch.zeros((), dtype=cs[-1].dtype)
    for i, s in enumerate(slps):
        w = sum(cs[j - first] for j in range(max(i + 1, first), M + 1)) / J
        score = score - (tw * w * s).sum()
    return score


def center_adv_per_task(batch: TrajBatch) -> TrajBatch:
    """The batch with each task's (agent's) advantages less their mean over its valid steps
    (``MetaConfig.outer_adv="task"``); padding stays 0."""
    T, N = batch.num_steps, batch.num_cols
    a = batch.adv.reshape(T, -1, N)
    mk = batch.mask.reshape(T, -1, N).to(a.dtype)
    mu = (a * mk).sum((0, 2)) / mk.sum((0, 2)).clamp_min(1)
    adv = torch.where(batch.mask, (a - mu.reshape(1, -1, 1)).reshape(batch.adv.shape), torch.zeros_like(batch.adv))
    return replace(batch, adv=adv)


def adv_stats_of(batch: TrajBatch) -> tuple[Tensor, Tensor]:
    """(mean, std) of a batch's advantages over its valid steps (the outer PPO's standardisation)."""
    a = batch.adv[batch.mask]
    return a.mean(), a.std(unbiased=False) + 1e-8


@dataclass
class MetaLossInfo:
    loss: Tensor
    ppo: Tensor
    vf: Tensor
    score: Tensor
    post_return: Tensor  # (Gf,)
    score_weight: Tensor  # (Gf,)
    phi: Params
    approx_kl: float = 0.0  # the largest (r - 1) - log r over the batches' sampling policies (see outer_target_kl)


def _approx_kl(logp: Tensor, behaviour_logp: Tensor, mask: Tensor) -> float:
    """The (r - 1) - log r estimate of KL(behaviour || current), mean over the valid steps."""
    with torch.no_grad():
        log_r = torch.where(mask, logp - behaviour_logp, torch.zeros_like(logp))
        return float(((torch.exp(log_r) - 1) - log_r)[mask].mean()) if bool(mask.any()) else 0.0


def meta_loss(
    model,
    theta: Params,
    log_alpha: Tensor,
    pre: list[TrajBatch] | TrajBatch,
    post: TrajBatch,
    cfg: MetaConfig,
    *,
    baseline: Tensor | None = None,
    adv_stats: tuple[Tensor, Tensor] | None = None,
    post_stats: tuple[Tensor, Tensor] | None = None,
    behaviour: str = "theta",
    task_weights: Tensor | None = None,
    mids: list[tuple[TrajBatch, tuple[Tensor, Tensor]]] | None = None,
) -> MetaLossInfo:
    """The loss whose gradient wrt ``theta`` and ``log_alpha`` is the meta-gradient estimate of
    Algorithm 1 for a batch of task pairs (agent dims of ``pre``/``post`` = tasks).

    ``loss = PPO(phi; post) + vf_coef * value_loss(phi; post) - ent_coef * H
             - (1/G) sum_g c_g * sum_k log pi(tau^k_g)``    (last sum: pre-update trajectories)

    where ``phi = adapt(theta, alpha; pre)`` keeps its graph. The PPO term's gradient at ratio 1
    is ``-1/(Lbar_g sigma)`` times the per-episode policy gradient of the post-adaptation return
    (mean over ``Lbar_g`` steps per episode, advantages divided by their std ``sigma``), so the
    score term uses the same scale: ``c_g = score_coef * (R_g - b_g) / (Lbar_g * sigma)`` with
    ``R_g`` the mean post-adaptation return of task g and ``b_g`` its baseline (``baseline`` if
    given, else per ``cfg.score_baseline``: ``"loo"`` = mean of the other tasks' ``R``).
    ``adv_stats``/``post_stats``: (mean, std) of the advantages and (R, Lbar) computed once on the
    whole batch, so that minibatches (subsets of tasks) use the full-batch normalisation.
    ``behaviour``: see :func:`adapt_trace` (``"theta"`` at training time: ``pre`` sampled by theta).
    ``task_weights`` ``(Gf,)``: weights of the tasks in the average (default uniform; they are
    normalised to sum 1), e.g. probabilities when the expectation is enumerated exactly.
    ``mids`` (``cfg.outer_steps="all"``): for m = 0 .. M-1, the batch sampled by ``phi^m`` (outer
    targets; it is also ``pre[m]``; ``phi^0 = theta``) and its advantage statistics; the PPO and
    value terms become the mean over ``phi^0 .. phi^M``, and each pre-update batch's score term
    carries the returns of the later steps it changes (:func:`_score_term`). With
    ``outer_steps="post"`` the list starts at ``phi^1`` (m = 1 .. M-1) and the mean is over
    ``phi^1 .. phi^M``."""
    model = as_model(model, cfg)
    fresh = isinstance(pre, list) and len(pre) == cfg.num_steps and cfg.num_steps > 1
    trace = adapt_trace(model, theta, log_alpha, pre, cfg, create_graph=True, behaviour=behaviour)
    phi = trace.phi
    mid_loss = None
    if mids:
        parts = [_ppo_terms(model, trace.phis[cfg.outer_from + m], b, cfg, st, task_weights)
                 for m, (b, st) in enumerate(mids)]
        mid_loss = sum(p + cfg.vf_coef * v - cfg.ent_coef * e for p, v, e in parts)
    lp, v = model.evaluate(phi, post)
    mask = post.mask
    adv = post.adv
    if cfg.normalize_adv:
        if adv_stats is None:
            mu = adv[mask].mean()
            sigma = adv[mask].std(unbiased=False) + 1e-8
        else:
            mu, sigma = adv_stats
        adv = (adv - mu) / sigma
    else:
        sigma = torch.ones((), dtype=adv.dtype)
    ratio = torch.exp(lp - post.logp)
    surr = torch.minimum(ratio * adv, torch.clamp(ratio, 1 - cfg.ppo_clip, 1 + cfg.ppo_clip) * adv)
    per_agent = _per_agent_mean(surr, mask)
    if task_weights is None:
        tw = torch.full_like(per_agent, 1.0 / per_agent.numel())
    else:
        tw = (task_weights / task_weights.sum()).to(per_agent.dtype)
    ppo = -(tw * per_agent).sum()
    vf = 0.5 * (tw * _per_agent_mean((v - post.returns) ** 2, mask)).sum()
    loss = ppo + cfg.vf_coef * vf
    if cfg.ent_coef:
        loss = loss - cfg.ent_coef * (tw * model.entropy(phi).reshape(-1)).sum()
    if mid_loss is not None:
        loss = (loss + mid_loss) / (len(mids) + 1)
    kl = max([_approx_kl(lp, post.logp, mask)] + [_approx_kl(l, b.logp, b.mask) for l, b in zip(trace.logps, trace.batches)
                                                 if l is not None and (fresh or (l is trace.logps[0] and behaviour == "theta"))])
    R, Lbar = post_returns(post) if post_stats is None else post_stats
    if cfg.score_term:
        if baseline is None:
            baseline = _loo(R) if cfg.score_baseline == "loo" else torch.zeros_like(R)
        c = _score_coef(R, Lbar, sigma, baseline, cfg)
        cs = [c]
        if mids:  # the intermediate returns' baselines: leave-one-out ("loo" and "ema"), none with "none"
            cs = []
            for b, (_, sd) in mids:
                Rj, Lj = post_returns(b)
                bj = _loo(Rj) if cfg.score_baseline != "none" else torch.zeros_like(Rj)
                cs.append(_score_coef(Rj, Lj, sd if cfg.normalize_adv else torch.ones((), dtype=Rj.dtype), bj, cfg))
            cs.append(c)
        first = cfg.outer_from if mids else cfg.num_steps
        score = _score_term(trace.score_logps(fresh), cs, first, tw)
        loss = loss + score
    else:
        c = torch.zeros_like(R)
        score = torch.zeros((), dtype=loss.dtype)
    return MetaLossInfo(loss, ppo.detach(), vf.detach(), score.detach(), R.detach(), c, phi, kl)


class MetaLearner:
    """theta, log alpha and their Adam optimiser; :meth:`update` runs the outer PPO epochs of one
    meta-iteration on a batch of task pairs (Algorithm 1, lines 9-11)."""

    def __init__(self, model, theta: Params, cfg: MetaConfig, log_alpha: Tensor | None = None):
        self.model = as_model(model, cfg)
        self.cfg = cfg
        self.theta = {k: v.detach().clone().requires_grad_(True) for k, v in theta.items()}
        dtype = next(iter(theta.values())).dtype
        la = init_log_alpha(cfg, self.model, (), dtype) if log_alpha is None else log_alpha.detach().clone()
        self.log_alpha = la.requires_grad_(True)
        self.opt = torch.optim.Adam(
            [{"params": list(self.theta.values()), "lr": cfg.lr}, {"params": [self.log_alpha], "lr": cfg.lr_alpha}],
            eps=1e-5,
        )
        self.ema_return: float | None = None
        vf = [v for k, v in self.theta.items() if k.startswith("vf/")]
        pi = [v for k, v in self.theta.items() if not k.startswith("vf/")]
        self._clip_groups = [g for g in (pi, vf, [self.log_alpha]) if g]

    @property
    def alpha(self) -> Tensor:
        return torch.exp(self.log_alpha.detach())

    @property
    def lr(self) -> float:
        """theta's current learning rate (MetaConfig.lr unless outer_kl_lr adapts it)."""
        return float(self.opt.param_groups[0]["lr"])

    @lr.setter
    def lr(self, value: float) -> None:
        self.opt.param_groups[0]["lr"] = float(value)

    def _close_iteration(self, info: dict, epochs: int, kls: list[float]) -> None:
        """Record a meta-iteration's outer epochs and KL in ``info`` and take the lr schedule's step."""
        info["outer_epochs"] = epochs
        info["approx_kl"] = max(kls)
        info["lr"] = self._adapt_lr(info["approx_kl"])

    def _adapt_lr(self, kl: float) -> float:
        """The adaptive schedule of ``MetaConfig.outer_kl_lr`` after an iteration of KL ``kl``; the new lr."""
        target = self.cfg.outer_kl_lr
        if target is not None and math.isfinite(kl):
            lo, hi = self.cfg.outer_lr_range
            if kl > 2 * target:
                self.lr = max(lo, self.lr / 1.5)
            elif kl < target / 2:
                self.lr = min(hi, self.lr * 1.5)
        return self.lr

    def params(self) -> tuple[Params, Tensor]:
        return {k: v.detach() for k, v in self.theta.items()}, self.log_alpha.detach()

    def adapt(self, pre, create_graph: bool = False, behaviour: str = "theta") -> Params:
        return adapt(self.model, self.theta, self.log_alpha, pre, self.cfg, create_graph=create_graph, behaviour=behaviour)

    def update(self, pre: list[TrajBatch] | TrajBatch, post: TrajBatch, generator: torch.Generator | None = None,
               mids: list[TrajBatch] | None = None) -> dict:
        """``mids``: the outer-target batches sampled by ``phi^0 .. phi^{M-1}`` (``outer_steps="all"``;
        from ``phi^1`` with ``"post"``)."""
        cfg = self.cfg
        if cfg.outer_adv == "task":
            post = center_adv_per_task(post)
            mids = [center_adv_per_task(b) for b in mids] if mids else mids
        mid_stats = [adv_stats_of(b) for b in mids] if mids else None
        G = post.agent_shape[0] if post.agent_shape else 1
        mask = post.mask
        adv_stats = (post.adv[mask].mean(), post.adv[mask].std(unbiased=False) + 1e-8)
        post_stats = post_returns(post)
        R = post_stats[0]
        baseline = None
        if cfg.score_baseline == "ema":
            b = self.ema_return if self.ema_return is not None else float(R.mean())
            baseline = torch.full_like(R, b)
        nmb = max(1, min(cfg.outer_minibatches, G))
        info = {}
        epochs, kls = 0, []
        for _ in range(cfg.outer_epochs):
            perm = torch.randperm(G, generator=generator) if nmb > 1 else torch.arange(G)
            epoch_kl = []
            for chunk in perm.chunk(nmb):
                if nmb > 1:
                    pre_mb = [b.select_agents(chunk) for b in pre] if isinstance(pre, list) else pre.select_agents(chunk)
                    post_mb = post.select_agents(chunk)
                    ps = (post_stats[0][chunk], post_stats[1][chunk])
                    bl = None if baseline is None else baseline[chunk]
                    if cfg.score_baseline == "loo" and baseline is None and R.numel() > 1:
                        bl = ((R.sum() - R) / (R.numel() - 1))[chunk]
                    mids_mb = [(b.select_agents(chunk), st) for b, st in zip(mids, mid_stats)] if mids else None
                else:
                    pre_mb, post_mb, ps, bl = pre, post, post_stats, baseline
                    mids_mb = list(zip(mids, mid_stats)) if mids else None
                out = meta_loss(self.model, self.theta, self.log_alpha, pre_mb, post_mb, cfg, baseline=bl, adv_stats=adv_stats, post_stats=ps, mids=mids_mb)
                self.opt.zero_grad(set_to_none=True)
                out.loss.backward()
                if cfg.max_grad_norm is not None:
                    for group in self._clip_groups:
                        torch.nn.utils.clip_grad_norm_(group, cfg.max_grad_norm)
                self.opt.step()
                epoch_kl.append(out.approx_kl)
                info = {"loss": float(out.loss.detach()), "ppo": float(out.ppo), "vf": float(out.vf), "score": float(out.score)}
            epochs += 1
            kls.append(sum(epoch_kl) / len(epoch_kl))
            if cfg.outer_target_kl is not None and kls[-1] > cfg.outer_target_kl:
                break
        self._close_iteration(info, epochs, kls)
        if cfg.score_baseline == "ema":
            r = float(R.mean())
            self.ema_return = r if self.ema_return is None else cfg.score_ema * self.ema_return + (1 - cfg.score_ema) * r
        info["post_return"] = float(R.mean())
        info["alpha"] = self.alpha.tolist()
        return info

    def distill(self, loss_of: Callable[[Params, Tensor], Tensor], columns: int, epochs: int, minibatches: int,
                generator: torch.Generator | None = None) -> float:
        """Kickstarting's own phase (:mod:`sumo_cli.ppo.kickstart`): ``epochs`` passes over ``columns``
        rollout columns in ``minibatches`` shuffled subsets, one Adam step of theta's optimizer on
        ``loss_of(theta, column indices)`` each (the global-norm clip of the outer update), as PPO
        kickstarts: the outer update's few steps a meta-iteration would imitate a teacher some twenty
        times slower than a PPO iteration does. Returns the last epoch's mean loss."""
        params = [v for k, v in self.theta.items() if not k.startswith("vf/")]
        last = []
        for _ in range(epochs):
            last = []
            for cols in torch.randperm(columns, generator=generator).chunk(max(1, min(minibatches, columns))):
                loss = loss_of(self.theta, cols)
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                if self.cfg.max_grad_norm is not None:
                    torch.nn.utils.clip_grad_norm_(params, self.cfg.max_grad_norm)
                self.opt.step()
                last.append(float(loss.detach()))
        return sum(last) / len(last) if last else 0.0

    def update_pairs(self, pairs: list[tuple[TrajBatch, TrajBatch, str, bool]], generator: torch.Generator | None = None) -> dict:
        """The outer update on several batches of task pairs at once (a training chain, see
        ``MetaConfig.train_rounds``): ``(pre, post, behaviour, score)`` each, ``pre`` one reused batch
        sampled by ``theta`` (``behaviour="theta"``) or by an adapted policy whose log-probs it stores
        (``"data"``, importance-weighted as at execution); ``score``: add the score-function term of
        ``pre`` (only meaningful where ``pre`` was sampled by ``pi_theta``). Every outer epoch takes one
        Adam step on the mean of the pairs' :func:`meta_loss` (full batches, no minibatches)."""
        cfg = self.cfg
        if cfg.score_baseline == "ema":
            raise ValueError("update_pairs supports the 'loo' and 'none' score baselines")
        if cfg.outer_adv == "task":
            pairs = [(pre, center_adv_per_task(post), behaviour, score) for pre, post, behaviour, score in pairs]
        stats = []
        for _, post, _, _ in pairs:
            mask = post.mask
            stats.append(((post.adv[mask].mean(), post.adv[mask].std(unbiased=False) + 1e-8), post_returns(post)))
        info: dict = {}
        epochs, kls = 0, []
        for _ in range(cfg.outer_epochs):
            total, parts = 0.0, []
            for (pre, post, behaviour, score), (adv_stats, ps) in zip(pairs, stats):
                c = cfg if score else cfg.replace(score_term=False)
                out = meta_loss(self.model, self.theta, self.log_alpha, pre, post, c, adv_stats=adv_stats, post_stats=ps, behaviour=behaviour)
                total = total + out.loss / len(pairs)
                parts.append(out)
            self.opt.zero_grad(set_to_none=True)
            total.backward()
            if cfg.max_grad_norm is not None:
                for group in self._clip_groups:
                    torch.nn.utils.clip_grad_norm_(group, cfg.max_grad_norm)
            self.opt.step()
            info = {
                "loss": float(total.detach()),
                **{k: float(sum(getattr(o, k) for o in parts) / len(parts)) for k in ("ppo", "vf", "score")},
            }
            epochs += 1
            kls.append(max(o.approx_kl for o in parts))
            if cfg.outer_target_kl is not None and kls[-1] > cfg.outer_target_kl:
                break
        self._close_iteration(info, epochs, kls)
        info["post_return"] = float(torch.stack([ps[0].mean() for _, ps in stats]).mean())
        info["post_returns"] = [float(ps[0].mean()) for _, ps in stats]
        info["alpha"] = self.alpha.tolist()
        return info
