"""Few-shot adaptation in nonstationary locomotion, evaluated as in the paper (Sec. 5.1, Fig. 4):
on one leg pair, play the 7 episodes of a sequence (torque factor 1, 5/6, ..., 0 on that pair),
adapting between episodes with the chosen strategy; then fully reset the environment, the policy
state and the adaptation (back to ``theta``); repeat ``repeats`` (paper: 50) times and report the
mean episodic reward of each of the 7 episodes with a 95% confidence interval.

Implementation: :func:`sumo_cli.adapt.chains.run_adaptation` (the games' dispatcher) on a
:class:`~sumo_cli.meta.locomotion_tasks.LocomotionChain` with ``repeats`` groups of one env each
(every group is an independent repetition, starting from ``theta``), ``start=1``, 7 rounds of one
episode. Strategies:

* ``none``: ``theta`` throughout;
* ``track``: one PPO update (``ppo_cfg``) of the current parameters after each episode;
* ``meta``: Algorithm 2: after each episode ``phi`` is recomputed from ``theta``, ``log_alpha`` on a
  buffer of the last ``buffer_episodes`` (default 3, the paper's locomotion buffer) episodes.

``python -m sumo_cli.compete.locomotion_eval [--iters 100] [--repeats 20]`` runs :func:`experiment`:
meta-training and PPO on the 12 training pairs with equal env steps, then the four
policy/strategy combinations on the 3 held-out pairs (a small-budget check, not the paper's scale).

Measured (one training seed, 250 iterations x 16 envs x 200 steps each for Algorithm 1 and PPO,
MLP 32-32, horizon 100, 20 repeats, 2 cores: meta-training 443 s, PPO 226 s); mean episodic reward
+- 95% half-width for episodes 1 .. 7::

    ppo_none      back    54+-18  46+-22  47+-18  35+-16  20+-17  35+-15  23+-19
    ppo_tracking  back    54+-18  52+-22  56+-13  35+-15  21+-11  36+-15  21+-16
    ppo_none      middle  54+-18  42+-17  50+-18  34+-13  20+-17  18+-19   7+-15
    ppo_tracking  middle  54+-18  55+-15  59+-16  26+-17  31+-15  18+-21  32+-15
    ppo_none      front   54+-18  68+-15  51+-15  52+-16  58+-14  52+-16  52+-18
    ppo_tracking  front   54+-18  57+-28  61+-23  46+-25  69+-15  53+-17  65+-18
    meta          all     -21 .. +3 (not better than meta_none, -16 .. +6)

PPO learns to walk along +y (training return -20 -> 44); losing the back or middle pair costs it
half its reward, the front pair almost nothing; one PPO step per episode (tracking) does not
recover it measurably. Algorithm 1 with the point task's settings learnt no gait in 250
iterations (pre/post returns around 0), so its meta-updates say nothing yet: this budget is far
below the paper's.
"""

from __future__ import annotations

import numpy as np

from sumo_cli import meta as ML
from sumo_cli.adapt.chains import run_adaptation
from sumo_cli.meta.locomotion_tasks import LocomotionChain
from sumo_cli.sim import locomotion as L

Z95 = 1.959963984540054


def evaluate(theta, spec, stats, strategy: str, pair, repeats: int = 50, seed: int = 0, *,
             log_alpha=None, cfg: ML.MetaConfig | None = None, ppo_cfg=None,
             buffer_episodes: int = ML.LOCOMOTION_BUFFER_EPISODES, horizon: int = L.HORIZON,
             physics: str = "fast", n_threads: int | None = None,
             deterministic: bool = False) -> dict:
    """Mean episodic reward per episode 1..7 on ``pair`` (a pair of leg indices or a name of
    :data:`~sumo_cli.sim.locomotion.TEST_PAIRS`: "back", "middle", "front").

    ``theta``: policy parameters (:mod:`sumo_cli.nets.policy`) for ``spec``; ``stats``: frozen
    observation-normaliser statistics or None. Returns ``{"pair", "strategy", "returns" (7,
    repeats), "mean" (7,), "ci95" (7,) (half-width, normal approximation: 1.96 * sd / sqrt(n))}``.
    """
    name, pair = _pair_name(pair)
    if strategy == "meta":
        if cfg is None or log_alpha is None:
            raise ValueError("strategy 'meta' needs cfg and log_alpha")
        cfg = cfg.replace(buffer_episodes=int(buffer_episodes))
    env = LocomotionChain(int(repeats), 1, [pair], start=1, horizon=horizon, physics=physics,
                          seed=seed, n_threads=n_threads)
    try:
        returns = run_adaptation(
            env, spec, strategy, theta, rounds=L.SEQUENCE_LEN, steps_per_round=env.horizon,
            seed=seed, stats=stats, log_alpha=log_alpha, cfg=cfg, ppo_cfg=ppo_cfg,
            deterministic=deterministic,
        )
    finally:
        env.close()
    return _summary(name, pair, strategy, returns)


def evaluate_sequence(theta, spec, stats, pair, repeats: int = 50, seed: int = 0, *, horizon: int = L.HORIZON,
                      physics: str = "fast", n_threads: int | None = None, deterministic: bool = False) -> dict:
    """No adaptation, with the recurrent state kept over the 7 episodes of a sequence (how LSTM and
    RL^2 policies are trained; RL^2 also sees the previous reward and done flag): ``repeats``
    independent envs on ``pair`` each play one whole sequence from a fresh reset and zero state.
    Same result dict as :func:`evaluate` (strategy ``"none"``)."""
    import torch

    from sumo_cli.ppo.collect import collect, new_carry

    name, pair = _pair_name(pair)
    env = L.LocomotionEnv(int(repeats), [pair], horizon=horizon, physics=physics, seed=seed, n_threads=n_threads)
    try:
        carry = new_carry(env, spec, seed=seed)
        gen = torch.Generator().manual_seed(seed)
        ro, _ = collect(env, spec, {k: v.detach() for k, v in theta.items()}, None if stats is None else dict(stats),
                        L.SEQUENCE_LEN * env.horizon, carry, gen, update_norm=False, reset_on="task",
                        deterministic=deterministic)
    finally:
        env.close()
    returns = ro.rewards.double().numpy().reshape(L.SEQUENCE_LEN, env.horizon, -1).sum(axis=1)
    return _summary(name, pair, "none", returns)


def _pair_name(pair) -> tuple[str, tuple[int, int]]:
    if isinstance(pair, str):
        return pair, L.TEST_PAIRS[pair]
    pair = tuple(sorted(int(x) for x in pair))
    return next((k for k, v in L.TEST_PAIRS.items() if v == pair), str(pair)), pair


def _summary(name: str, pair, strategy: str, returns: np.ndarray) -> dict:
    n = returns.shape[1]
    sd = returns.std(axis=1, ddof=1) if n > 1 else np.zeros(returns.shape[0])
    return {"pair": name, "legs": pair, "strategy": strategy, "returns": returns,
            "mean": returns.mean(axis=1), "ci95": Z95 * sd / np.sqrt(n)}


def _known(cls, stored: dict | None):  # noqa: ANN001, ANN202
    """``cls(**stored)`` keeping only the fields ``cls`` has (configs stored by other code versions)."""
    import dataclasses

    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in (stored or {}).items() if k in names})


def evaluate_checkpoint(spec, params, stats, strategy: str, meta_params: dict, metadata: dict, pair,
                        repeats: int = 50, seed: int = 0, n_threads: int | None = None) -> dict:
    """One trained locomotion agent (a checkpoint written by ``sumo train --env locomotion``) with
    its own strategy on ``pair``: ``none`` (MLP: :func:`evaluate`; LSTM / RL^2: state kept over the
    sequence, :func:`evaluate_sequence`), ``track`` (one PPO step per episode with the run's PPO
    settings) or ``meta`` (Algorithm 2 with the learned step sizes and the run's MetaConfig; a
    3-episode buffer). The env settings (horizon, physics) are the run's. Track and meta play
    through :func:`evaluate` (``run_adaptation``), which zeroes a recurrent state at every
    episode start."""
    from sumo_cli.adapt.meta_execution import LOG_ALPHA_KEY
    from sumo_cli.ppo.ppo import PPOConfig

    kw = dict(repeats=repeats, seed=seed, horizon=int(metadata.get("horizon", L.HORIZON)),
              physics=str(metadata.get("physics", "fast")), n_threads=n_threads)
    if strategy in ("none", "rl2"):
        if spec.recurrent:
            out = evaluate_sequence(params, spec, stats, pair, **kw)
        else:
            out = evaluate(params, spec, stats, "none", pair, **kw)
        out["strategy"] = strategy
        return out
    if strategy == "track":
        ppo_cfg = _known(PPOConfig, metadata.get("ppo_config"))
        return evaluate(params, spec, stats, "track", pair, ppo_cfg=ppo_cfg, **kw)
    if strategy == "meta":
        stored = dict(metadata.get("meta_config") or {})
        stored.setdefault("execution", "paper")  # runs stored before the execution rule was a setting played Algorithm 2
        cfg = _known(ML.MetaConfig, stored)
        log_alpha = meta_params.get(LOG_ALPHA_KEY)
        if log_alpha is None:
            log_alpha = ML.init_log_alpha(cfg, ML.GaussianModel(spec), ())
        return evaluate(params, spec, stats, "meta", pair, log_alpha=log_alpha, cfg=cfg,
                        buffer_episodes=cfg.buffer_episodes, **kw)
    raise ValueError(f"unknown strategy {strategy!r}")


def evaluate_all(theta, spec, stats, strategies=("none", "track", "meta"), pairs=("back", "middle", "front"),
                 **kw) -> dict:
    """:func:`evaluate` for every strategy and test pair: ``{(strategy, pair): result}``."""
    return {(s, p): evaluate(theta, spec, stats, s, p, **kw) for s in strategies for p in pairs}


def format_table(results: dict) -> str:
    lines = ["strategy  pair    " + "  ".join(f"ep{k:<9d}" for k in range(1, L.SEQUENCE_LEN + 1))]
    for (s, p), r in results.items():
        cells = "  ".join(f"{m:6.1f}+-{c:<4.1f}" for m, c in zip(r["mean"], r["ci95"]))
        lines.append(f"{s:<9s} {p:<7s} {cells}")
    return "\n".join(lines)



# ----------------------------------------------------------------------------------------------
# a small end-to-end experiment (2-core budget): meta-training vs PPO, evaluated on the test pairs


def experiment(iters: int = 100, groups: int = 8, group_size: int = 2, horizon: int = L.HORIZON,
               repeats: int = 20, seed: int = 0, hidden: int = 32, n_threads: int | None = None,
               log=print) -> dict:
    """Meta-train (Algorithm 1, training pairs, consecutive episodes (k, k+1), k uniform in 1..6)
    and, with the same env steps, PPO on the 7-episode sequences of the training pairs; then
    :func:`evaluate` ``meta`` (meta-trained theta, Algorithm 2), ``meta_none`` (same theta, no
    adaptation), ``ppo_none`` and ``ppo_tracking`` on the three held-out pairs."""
    import json
    import time

    import torch

    from sumo_cli.ppo import ppo as PPO
    from sumo_cli.nets import policy as P

    torch.set_num_threads(1)
    spec = P.PolicySpec("mlp", 37, 12, hidden=hidden)
    cfg = ML.MetaConfig()
    out: dict = {"config": dict(iters=iters, groups=groups, group_size=group_size, horizon=horizon,
                                repeats=repeats, seed=seed, hidden=hidden)}
    t0 = time.perf_counter()
    chain = LocomotionChain(groups, group_size, L.TRAIN_PAIRS, horizon=horizon, seed=seed, n_threads=n_threads)
    res = MT.meta_train(chain, spec, cfg, iters, seed, steps_pre=horizon, steps_post=horizon,
                        callback=lambda it, info, r: log(f"meta it {it} pre {info['pre_return']:.1f} post {info['post_episode_return']:.1f}") if it % 10 == 0 else None)
    chain.close()
    out["meta_train_s"] = time.perf_counter() - t0
    out["alpha"] = torch.exp(res.log_alpha).tolist()
    pcfg = PPO.PPOConfig(num_steps=2 * horizon, epochs=4, num_minibatches=4, lr=cfg.lr)
    t0 = time.perf_counter()
    penv = L.LocomotionEnv(groups * group_size, L.TRAIN_PAIRS, resample_pairs=True, horizon=horizon,
                           seed=seed, n_threads=n_threads)
    pres = PPO.train_ppo(penv, spec, pcfg, iters, seed,
                         callback=lambda it, st, r: log(f"ppo it {it} return {st['mean_return']:.1f}") if it % 10 == 0 else None)
    penv.close()
    out["ppo_train_s"] = time.perf_counter() - t0
    pth = {k: v.detach() for k, v in pres.params.items()}
    mstats = {k: v.clone() for k, v in res.obs_norm.stats.items()}
    pstats = pres.obs_norm.stats
    runs = {
        "meta": (res.theta, mstats, "meta"), "meta_none": (res.theta, mstats, "none"),
        "ppo_none": (pth, pstats, "none"), "ppo_tracking": (pth, pstats, "track"),
    }
    table = {}
    for name, (th, st, strat) in runs.items():
        for p in ("back", "middle", "front"):
            r = evaluate(th, spec, st, strat, p, repeats=repeats, seed=10_000 + seed, log_alpha=res.log_alpha,
                         cfg=cfg, ppo_cfg=pcfg, horizon=horizon, n_threads=n_threads)
            table[(name, p)] = r
            out[f"{name}/{p}"] = {"mean": r["mean"].round(2).tolist(), "ci95": r["ci95"].round(2).tolist()}
            log(json.dumps({name + "/" + p: out[f"{name}/{p}"]}))
    out["table"] = format_table(table)
    log(out["table"])
    return out


if __name__ == "__main__":  # pragma: no cover
    import argparse
    import json

    ap = argparse.ArgumentParser(description="none vs tracking vs meta on the held-out leg pairs")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--groups", type=int, default=8)
    ap.add_argument("--group-size", type=int, default=2)
    ap.add_argument("--horizon", type=int, default=L.HORIZON)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    res = experiment(a.iters, a.groups, a.group_size, a.horizon, a.repeats, a.seed)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({k: v for k, v in res.items() if k != "table"}, f, indent=1)
