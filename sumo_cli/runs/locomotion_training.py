"""Locomotion training runs in the database (``sumo train --env locomotion``): the same run,
iteration, version and learner-state bookkeeping as sumo training (:mod:`sumo_cli.runs.training`, whose
:func:`~sumo_cli.runs.training.commit_iteration`, :func:`~sumo_cli.runs.training.write_start` and
:func:`~sumo_cli.runs.training.drive` do the writing), around the learners of
:mod:`sumo_cli.runs.locomotion_learn`.

A run is a ``Run`` row of kind ``train`` whose config is ``{"env": "locomotion", "locomotion":
LocoConfig, "agent": name}``, and an ``Agent`` row of pseudo-body ``loco`` (names ``loco-mlp``,
``loco-mlp-track``, ``loco-meta``, ``loco-rl2``, ...; see :mod:`sumo_cli.names`), so locomotion
agents can never be picked as sumo players by their name. Versions carry the env settings and the
strategy's configs in their checkpoint metadata, which ``sumo eval locomotion`` reads.
"""

from __future__ import annotations

import time
from typing import Callable

from sumo_cli import __version__, names
from sumo_cli.runs import training as TR
from sumo_cli.errors import UserError
from sumo_cli.runs import locomotion_learn as LL
from sumo_cli.selfplay import selfplay as SP
from sumo_cli.store import ownership
from sumo_cli.store import runs as store_runs
from sumo_cli.store import registry
from sumo_cli.store.database import Database

ENV = "locomotion"


def check_new_run(db: Database, cfg: LL.LocoConfig, name: str | None) -> str:
    """The agent name of a new run, or a UserError saying what is wrong (nothing is written)."""
    bad = cfg.check()
    if bad:
        raise UserError(bad[0])
    with db.read() as s:
        return TR.new_agent_name(s, name, names.canonical_name(names.LOCOMOTION, cfg.arch, cfg.strategy))


def create_run(db: Database, cfg: LL.LocoConfig, agent_name: str) -> int:
    """The Run and Agent rows; theta_0 and the learner's initial state are written when
    :func:`run_training` starts (as for sumo training runs)."""
    config = {"env": ENV, "locomotion": cfg.to_dict(), "agent": agent_name}
    with db.write() as s:
        run_id = store_runs.create_run(s, TR.RUN_KIND, config, cfg.seed, cfg.iterations, __version__)
        registry.create_agent(s, agent_name, names.LOCOMOTION, cfg.arch, cfg.strategy, "trained",
                              {"run_id": run_id, "env": ENV, "config": cfg.to_dict()})
    return run_id


def _write_start(db: Database, run_id: int, cfg: LL.LocoConfig, agent_name: str, learner) -> dict:  # noqa: ANN001
    return TR.write_start(db, run_id, agent_name, learner, body=names.LOCOMOTION, strategy=cfg.strategy,
                          ckpt_meta=LL.snapshot_metadata(cfg, learner))


def check_resume(db: Database, run_id: int, extend_to: int | None = None) -> tuple[LL.LocoConfig, str, int]:
    """:func:`training.resumable_run` of a locomotion training run, its configuration parsed."""
    cfg, agent, done = TR.resumable_run(db, run_id, "locomotion", extend_to)
    return LL.LocoConfig.from_dict(cfg), agent, done


def run_training(db: Database, run_id: int, n_threads: int = 1,
                 on_iteration: Callable[[SP.Progress], None] | None = None) -> dict:
    """Train run ``run_id`` from where it stands to its last iteration. Ctrl-C: the run is marked
    interrupted and :class:`~sumo_cli.runs.training.TrainingInterrupted` is raised."""
    with db.read() as s:
        run = store_runs.get_run(s, run_id, TR.RUN_KIND)
        cfg = LL.LocoConfig.from_dict(run.config["locomotion"])
        agent_name = run.config["agent"]
        state = dict(run.state or {})
    owner = ownership.claim(db, run_id)
    try:  # a Ctrl-C during the set-up leaves a run to resume too
        learner = LL.make_learner(cfg, n_threads)
        if "theta0" not in state:  # a new run, or one stopped before they were written: derived from the seed
            state = _write_start(db, run_id, cfg, agent_name, learner)
        start = TR.restore_learner(learner, state)
        with db.write() as s:
            store_runs.set_run_status(s, run_id, "running", done=start, owner=owner)
    except KeyboardInterrupt:
        raise TR.interrupted(db, run_id, cfg.iterations, owner) from None
    ckpt_meta = LL.snapshot_metadata(cfg, learner)

    def save_iteration(k: int, lrn, metrics: dict, snapshot: bool) -> None:  # noqa: ANN001
        summary = {key: metrics.get(key) for key in ("mean_return", "episodes")}
        TR.commit_iteration(db, run_id, agent_name, k, lrn, metrics, snapshot, body=names.LOCOMOTION,
                            strategy=cfg.strategy, env_steps=k * cfg.steps_per_iteration, summary=summary,
                            ckpt_meta=ckpt_meta, owner=owner)

    history: list[SP.Progress] = []

    def report(p: SP.Progress) -> None:
        history.append(p)
        TR._after_iteration(p)
        if on_iteration is not None:
            on_iteration(p)

    t0 = time.perf_counter()
    TR.drive(db, run_id, cfg.iterations, lambda: LL.train(cfg, learner, save_iteration, start=start, on_iteration=report),
             owner)
    wall = time.perf_counter() - t0
    steps = len(history) * cfg.steps_per_iteration
    last = history[-1].metrics if history else {}
    keys = ["mean_return", "episodes"] + [f"return_ep{i}" for i in range(1, 8)] + ["pre_return", "post_episode_return"]
    return {
        "run_id": run_id, "env": ENV, "agent": agent_name, "arch": cfg.policy_arch, "strategy": cfg.strategy,
        "status": "finished", "iterations": cfg.iterations, "resumed_from": start,
        "env_steps": cfg.iterations * cfg.steps_per_iteration, "steps_per_iteration": cfg.steps_per_iteration,
        "latest_version": cfg.iterations, "wall_seconds": round(wall, 3),
        "steps_per_second": round(steps / wall, 1) if wall > 0 and steps else None,
        "last_iteration": {k: last.get(k) for k in keys if k in last},
    }


# ---------------------------------------------------------------------------------------------
# evaluation on the held-out pairs (`sumo eval locomotion`)

EVAL_KIND = "locomotion-eval"
TEST_PAIRS = ("back", "middle", "front")


def load_locomotion_agents(db: Database, agent_names: list[str]) -> list[tuple[object, str]]:
    """Every named agent's checkpoint (verified) with the strategy it plays: its own, or the one
    after a colon (``loco-mlp-track:none`` plays the tracking agent's policy without adaptation;
    the agent-name grammar's ``NAME[@V][:STRATEGY]``, as in every command that plays agents). One
    sentence on the first bad name; nothing is written."""
    from sumo_cli.store.library import load_agent

    if not agent_names:
        raise UserError("name at least one locomotion agent, e.g. loco-mlp")
    out = []
    for text in agent_names:
        a = load_agent(db, text)
        if a.body != names.LOCOMOTION:
            raise UserError(f"{a.display} is a sumo agent ({a.body}); `sumo eval locomotion` takes agents trained "
                            "with `sumo train --env locomotion` (loco-mlp, loco-track, loco-meta, ...)")
        out.append((a, a.strategy))
    return out


def evaluate_agents(db: Database, agents: list[tuple[object, str]], repeats: int, seed: int, n_threads: int = 1,
                    on_result: Callable[[dict], None] | None = None) -> dict:
    """Each (agent, strategy) of :func:`load_locomotion_agents` on the 3 held-out pairs: 7 episodes, full reset, ``repeats``
    times (same seed for every agent, so their episode-1 conditions match); stored as one run of
    kind ``locomotion-eval`` whose state holds every per-episode return. Returns that document."""
    from sumo_cli.compete.locomotion_eval import evaluate_checkpoint
    from sumo_cli.runtime.threads import torch_threads

    if repeats < 1:
        raise UserError(f"--repeats must be at least 1, got {repeats}")
    results = []
    t0 = time.perf_counter()
    with torch_threads(1):
        for a, strategy in agents:
            for pair in TEST_PAIRS:
                t1 = time.perf_counter()
                r = evaluate_checkpoint(a.spec, a.params, a.obs_stats, strategy, a.meta_params, a.metadata, pair,
                                        repeats=repeats, seed=seed, n_threads=n_threads)
                row = {"agent": f"{a.name}@{a.version}", "arch": a.spec.arch, "strategy": strategy, "pair": pair,
                       "legs": list(r["legs"]), "mean": [float(x) for x in r["mean"]],
                       "ci95": [float(x) for x in r["ci95"]],
                       "returns": [[float(x) for x in ep] for ep in r["returns"]],
                       "seconds": round(time.perf_counter() - t1, 3)}
                results.append(row)
                if on_result is not None:
                    on_result(row)
    config = {"agents": [f"{a.name}@{a.version}:{strategy}" for a, strategy in agents], "repeats": repeats, "pairs": list(TEST_PAIRS),
              "episodes": 7}
    with db.write() as s:
        run_id = store_runs.create_run(s, EVAL_KIND, config, seed, len(results), __version__)
        store_runs.set_run_status(s, run_id, "finished", done=len(results), state={"results": results})
    return {"run_id": run_id, "seed": seed, "repeats": repeats, "wall_seconds": round(time.perf_counter() - t0, 3),
            "results": results}
