"""What a meta outer step costs against a PPO step on the same batch (issue: "cheaper meta-training").

``python -m benchmarks.meta_cost`` builds, for the Ant's MLP and LSTM policies, one meta-iteration's
worth of data at ``sumo train --strategy meta``'s default sizes (8 tasks x 512 env steps per
collection, here 5 episodes of 60-100 steps per task, with the stored recurrent states of 10-step
BPTT windows as the rollouts carry them) and times, in this process, one thread:

* one outer step of :meth:`sumo_cli.meta.MetaLearner.update` with the default
  :class:`~sumo_cli.meta.MetaConfig` (3 inner steps on fresh batches, create_graph, the
  outer PPO objective over every step's batch, backward into theta and log alpha);
* one PPO gradient step (clipped surrogate + value loss, backward) of the same policy on the same
  data, as the PPO learner takes it (one set of parameters, the tasks' episodes as columns of one
  batch): the post-adaptation batch alone, and all four collections (the same env steps as the
  meta step consumed).

The data are random (timing does not depend on the values). CPU seconds, the median of ``--repeats``.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from sumo_cli import meta as ML
from sumo_cli.nets import policy as P
from sumo_cli.sim.bodies import body_spec

TASKS, EPISODES, MAX_LEN, WINDOW = 8, 5, 100, 10


def _batch(spec: P.PolicySpec, gen: torch.Generator) -> ML.TrajBatch:
    G, K, L = TASKS, EPISODES, MAX_LEN
    r = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
    b = ML.episode_batch(r(L, G, K, spec.obs_dim), r(L, G, K, spec.act_dim), r(L, G, K) - 10, r(L, G, K), r(L, G, K),
                         torch.randint(60, L + 1, (G, K), generator=gen), gamma=0.995)
    if spec.recurrent:
        b.chunk_states = {k: 0.1 * torch.randn(L // WINDOW, G, K, spec.hidden, generator=gen) for k in P.STATE_KEYS}
        b.chunk_len = WINDOW
    return b


def _cpu_seconds(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        t = time.process_time()
        fn()
        times.append(time.process_time() - t)
    return statistics.median(times)


def measure(arch: str, repeats: int = 3) -> dict:
    torch.set_num_threads(1)
    b = body_spec("ant")
    spec = P.PolicySpec(arch, b.obs_size, b.n_actions)
    cfg = ML.MetaConfig(bptt_chunk=WINDOW if spec.recurrent else None, outer_epochs=1)
    model = ML.GaussianModel(spec, cfg.bptt_chunk)
    theta = P.init_params(spec, torch.Generator().manual_seed(0))
    gen = torch.Generator().manual_seed(1)
    pre = [_batch(spec, gen) for _ in range(cfg.num_steps)]
    post = _batch(spec, gen)
    learner = ML.MetaLearner(model, theta, cfg)

    def ppo_step(batches: list[ML.TrajBatch]) -> None:
        th = {k: v.clone().requires_grad_(True) for k, v in theta.items()}  # one policy, tasks as batch columns
        loss = 0.0
        for bb in batches:
            lp, v = model.evaluate(th, bb)
            ratio = torch.exp(lp - bb.logp)
            surr = torch.minimum(ratio * bb.adv, ratio.clamp(0.8, 1.2) * bb.adv)
            n = bb.mask.sum()
            loss = loss - (surr * bb.mask).sum() / n + 0.5 * (((v - bb.returns) ** 2) * bb.mask).sum() / n
        loss.backward()

    meta = _cpu_seconds(lambda: learner.update(pre, post, gen, mids=pre), repeats)
    ppo_post = _cpu_seconds(lambda: ppo_step([post]), repeats)
    ppo_all = _cpu_seconds(lambda: ppo_step(pre + [post]), repeats)
    return {"arch": arch, "meta_s": meta, "ppo_post_s": ppo_post, "ppo_all_s": ppo_all,
            "ratio_post": meta / ppo_post, "ratio_same_env_steps": meta / ppo_all}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archs", default="mlp,lstm")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    for arch in args.archs.split(","):
        m = measure(arch, args.repeats)
        print(f"{arch}: meta outer step {m['meta_s'] * 1000:.0f} ms CPU; PPO step on the post batch "
              f"{m['ppo_post_s'] * 1000:.0f} ms ({m['ratio_post']:.1f}x), on all four collections "
              f"{m['ppo_all_s'] * 1000:.0f} ms ({m['ratio_same_env_steps']:.1f}x)")


if __name__ == "__main__":
    main()
