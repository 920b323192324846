"""Training runs in the database: what joins the trainer (:mod:`sumo_cli.selfplay.selfplay`) to the
store, as :mod:`sumo_cli.store.library` does for agents.

A run is a ``Run`` row (kind ``train``; its config is the whole :class:`TrainConfig` and the agent
name) and an ``Agent`` row created with it. Files, under ``checkpoint_root/``:

- ``<agent>/v00000``: theta_0, the initialisation (self-play's oldest opponent; not a version row);
- ``<agent>/v<k>``: version k (parameters after k updates + normaliser + extras), a ``Version``
  row with its SHA-256 and the run id;
- ``runs/train-<id>/learner-<k>``: everything needed to continue after iteration k (parameters,
  Adam moments and step counts, normaliser; RNG streams are derived from (seed, iteration), so the
  iteration counter is their state). Only the latest one is kept.

Iteration k is committed as one transaction (its ``Iteration`` row, its ``Version`` row, the run's
progress and the learner-state file's hash) after its files are written, so a run killed at any
moment resumes from the last committed iteration and ends bit-identical to an uninterrupted one.

:func:`write_start`, :func:`commit_iteration` and :func:`drive` are shared with locomotion training
(:mod:`sumo_cli.runs.locomotion_training`, runs whose config has ``"env": "locomotion"``).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sumo_cli import __version__, names
from sumo_cli.errors import UserError
from sumo_cli.selfplay import selfplay as SP
from sumo_cli.ppo.kickstart import Teacher
from sumo_cli.selfplay.recipes import AUTO_TEACHER, AUTO_TEACHER_BOTH
from sumo_cli.selfplay.sumo_vec import OpponentPolicy
from sumo_cli.store.library import checkpoint_file
from sumo_cli.nets import normalizer as nz
from sumo_cli.nets.checkpoint import checkpoint_paths, checkpoint_tensors, load_checkpoint, save_checkpoint
from sumo_cli.store import ownership
from sumo_cli.sim.bodies import BODIES
from sumo_cli.store import runs as store_runs
from sumo_cli.store import registry
from sumo_cli.store.database import Database

RUN_KIND = store_runs.TRAIN_KIND


class TrainingInterrupted(Exception):
    """Ctrl-C: everything up to iteration ``done`` is saved; the run can be resumed."""

    def __init__(self, run_id: int, done: int, total: int):
        super().__init__(f"training run {run_id} interrupted after iteration {done} of {total}")
        self.run_id, self.done, self.total = run_id, done, total


@dataclass
class Opponent:
    """One entry of ``--opponents``: ``self``, or a stored agent (optionally pinned to a version)."""

    name: str
    body: str
    pinned: int | None = None


def _run_dir(db: Database, run_id: int) -> Path:
    return registry.checkpoint_root(db.url) / "runs" / f"train-{run_id}"


# ---------------------------------------------------------------------------------------------
# checks (nothing is written)


def new_agent_name(s, name: str | None, canonical: str) -> str:  # noqa: ANN001 - a store session
    """The agent a new training run creates: ``name`` (--name), else the combination's canonical
    name; when an agent shipped in policies/ holds that one (a fresh clone's ``ant-mlp``), the first
    numbered name no agent holds (``ant-mlp-2``, ``ant-mlp-3``, ...), so a first run starts. A name
    held by the user's own agent is refused in one sentence (with the command that continues its
    unfinished run)."""
    from sumo_cli.store.shipped import PROVENANCE

    agent_name = names.validate_custom_name(name) if name else canonical
    existing = registry.get_agent(s, agent_name)
    if existing is not None and name is None and existing.provenance == PROVENANCE:
        k = 2
        while registry.get_agent(s, names.numbered_name(canonical, k)) is not None:
            k += 1
        return names.numbered_name(canonical, k)
    if existing is not None:
        run_id = existing.origin.get("run_id") if isinstance(existing.origin, dict) else None
        run = store_runs.find_run(s, run_id)
        resumable = run is not None and run.kind == RUN_KIND and run.status != "finished"
        hint = f", or continue its unfinished run with `sumo train --resume {run_id}`" if resumable else ""
        raise UserError(f"an agent named {agent_name!r} already exists; pick another with --name{hint}")
    return agent_name


def check_new_run(db: Database, cfg: SP.TrainConfig, name: str | None) -> tuple[str, list[Opponent]]:
    """The agent name and the resolved opponents of a new run, or a UserError saying what is wrong."""
    bad = cfg.check()
    if bad:
        raise UserError(bad[0])
    canonical = names.canonical_name(cfg.body, cfg.arch, cfg.strategy)
    if SP.learner_factory(cfg.strategy) is None:
        raise UserError(f"training with strategy {cfg.strategy!r} is not available in this sumo yet "
                        f"(it plugs in through sumo_cli.selfplay.selfplay.register_learner)")
    opponents: list[Opponent] = []
    with db.read() as s:
        agent_name = new_agent_name(s, name, canonical)
        for token in cfg.opponents:
            token = token.strip()
            if token.lower() == SP.SELF:
                opponents.append(Opponent(SP.SELF, cfg.body))
                continue
            ref = names.parse(names.without_strategy(token, "--opponents", "training opponents do not adapt"))
            rv = registry.resolve(s, token)  # unknown names: one sentence with close matches
            opponents.append(Opponent(rv.agent_name, rv.body, rv.version if ref.version else None))
        files = [(v.checkpoint_path, v.sha256) for op in opponents if op.name != SP.SELF
                 for v in registry.get_agent(s, op.name).versions if op.pinned is None or v.version == op.pinned]
    if not opponents:
        raise UserError("--opponents is empty; give agent names, or self for self-play")
    bodies = sorted({op.body for op in opponents}, key=list(BODIES).index)
    if cfg.n_envs < len(bodies):
        raise UserError(f"--envs {cfg.n_envs} cannot give each opponent body ({', '.join(bodies)}) a bout slot of its "
                        f"own; use --envs {len(bodies)} or more")
    still = cfg.strategy != "meta" and (cfg.motionless_iterations > 0 or cfg.motionless_fraction > 0)
    if still and not any(BODIES[op.body].stands_unactuated for op in opponents):
        sag = opponents[0].body.capitalize()
        raise UserError(f"a motionless {sag} sinks below the fall line by itself (a win for nothing), so motionless "
                        "opponents are drawn only from bodies that stand: add an Ant or a Bug to --opponents (e.g. "
                        "ant-mlp@155,bug-mlp@328), or turn them off with --motionless-iterations 0 --motionless-fraction 0")
    if cfg.init_from:
        cfg.init_from = _check_init_from(db, cfg)
    if cfg.teacher in (AUTO_TEACHER, AUTO_TEACHER_BOTH):  # checked as it is chosen
        cfg.teacher = _auto_teacher(db, cfg)
    elif cfg.teacher.lower() == "none":
        cfg.teacher = ""
    elif cfg.teacher:
        cfg.teacher = _check_teacher(db, cfg)
    for path, sha in files:  # a missing or corrupt opponent is refused now, before the run is written
        load_checkpoint(path, sha)
    return agent_name, opponents


def planned_iteration_env_steps(cfg: SP.TrainConfig) -> int:
    """The env steps one iteration of ``cfg`` simulates: its batch (``n_envs x num_steps``), once per
    collection phase of a meta-iteration (a few iterations measure the held-out gain with one or two
    phases more)."""
    if cfg.strategy == "meta":
        from sumo_cli.selfplay.meta_selfplay import meta_config

        return meta_config(SP.policy_spec(cfg), cfg).phases * cfg.steps_per_iteration
    return cfg.steps_per_iteration


def _load_version(db: Database, ref: str):  # noqa: ANN202 - (registry version, Checkpoint)
    """The stored version ``ref`` (``name`` or ``name@version``) and its checkpoint, SHA-256 checked."""
    with db.read() as s:
        rv = registry.resolve(s, ref)
    return rv, load_checkpoint(rv.checkpoint_path, rv.sha256)


def _check_init_from(db: Database, cfg: SP.TrainConfig) -> str:
    """``cfg.init_from`` pinned to one stored version (``name@version``), once its checkpoint loads
    and holds a policy of the run's shape; else a UserError in one sentence."""
    rv, ck = _load_version(db, names.without_strategy(cfg.init_from, "--init-from", "it starts from the parameters"))
    want = SP.policy_spec(cfg)
    if ck.spec != want:
        raise UserError(f"--init-from {rv.agent_name}@{rv.version} is a {rv.body} {ck.spec.arch} policy "
                        f"(features {ck.spec.features}, {ck.spec.input_dim} inputs); this run trains a {cfg.body} "
                        f"{want.arch} policy (features {want.features}, {want.input_dim} inputs)")
    return f"{rv.agent_name}@{rv.version}"


def _auto_teacher(db: Database, cfg: SP.TrainConfig) -> str:
    """The recipe's "auto" teacher: the body's MLP (``<body>-mlp``) for a recurrent learner that can be
    kickstarted, with "auto-both" also the body's LSTM (``<body>-lstm``) for an MLP learner, when the
    database has one that observes what the learner observes; else none."""
    if cfg.strategy == "meta" or (cfg.policy_arch == "mlp" and cfg.teacher != AUTO_TEACHER_BOTH):
        return ""
    name = names.canonical_name(cfg.body, "lstm" if cfg.policy_arch == "mlp" else "mlp", "none")
    with db.read() as s:
        if registry.get_agent(s, name) is None:
            return ""
    rv, ck = _load_version(db, name)  # a corrupt file is refused, not skipped
    return "" if _unfit_teacher(ck.spec, cfg) else f"{rv.agent_name}@{rv.version}"


def _unfit_teacher(spec, cfg: SP.TrainConfig) -> str | None:  # noqa: ANN001 - nets.policy.PolicySpec
    """Why a stored policy of this spec cannot teach the run's policy, or None."""
    want = SP.policy_spec(cfg)
    if spec.arch not in ("mlp", "lstm"):
        return f"is a {spec.arch} policy; a teacher must be an MLP or an LSTM"
    if (spec.obs_dim, spec.act_dim, spec.features) != (want.obs_dim, want.act_dim, want.features):
        return (f"has features {spec.features} and {spec.obs_dim} inputs; "
                f"this run's {cfg.body} policy has features {want.features} and {want.obs_dim}")
    return None


def _check_teacher(db: Database, cfg: SP.TrainConfig) -> str:
    """``cfg.teacher`` pinned to one stored version, once it loads as an MLP or LSTM policy that observes what
    the run's policy observes; else a UserError in one sentence."""
    rv, ck = _load_version(db, names.without_strategy(cfg.teacher, "--teacher", "a teacher does not adapt"))
    problem = _unfit_teacher(ck.spec, cfg)
    if problem:
        raise UserError(f"--teacher {rv.agent_name}@{rv.version} {problem}")
    return f"{rv.agent_name}@{rv.version}"


def load_teacher(db: Database, ref: str) -> Teacher:
    """The stored version ``ref`` as a :class:`~sumo_cli.ppo.kickstart.Teacher` (SHA-256 checked)."""
    rv, ck = _load_version(db, ref)
    return Teacher(ck.spec, {k: v.detach() for k, v in ck.params.items()}, ck.obs_stats)


def warm_start(db: Database, learner: SP.Learner, ref: str) -> None:
    """Replace the learner's fresh policy and observation statistics with those of the stored
    version ``ref`` (SHA-256 checked); the optimiser states stay fresh."""
    rv, ck = _load_version(db, ref)
    tensors, metadata = learner.state()
    tensors = {**tensors, **checkpoint_tensors(ck.params, ck.obs_stats)}
    learner.load_state(tensors, metadata)


# ---------------------------------------------------------------------------------------------
# the store the trainer writes to


class DbTrainStore:
    """:class:`~sumo_cli.selfplay.selfplay.TrainStore` over the database and checkpoint files."""

    def __init__(self, db: Database, run_id: int, agent_name: str, cfg: SP.TrainConfig, opponents: list[Opponent],
                 theta0: dict, cache_size: int = 64, owner: str | None = None):
        self.db, self.run_id, self.agent_name, self.cfg, self.owner = db, run_id, agent_name, cfg, owner
        self.opponents = opponents
        self.theta0 = theta0
        self._cache: OrderedDict[tuple[str, int], OpponentPolicy] = OrderedDict()
        self._cache_size = cache_size
        self.files: dict[tuple[str, int], tuple[str, str, str]] = {}  # (name, version) -> path, sha, body
        self.own: list[int] = [0]
        with db.read() as s:
            for op in opponents:
                if op.name == SP.SELF:
                    continue
                agent = registry.get_agent(s, op.name)
                for v in agent.versions:
                    if op.pinned is None or v.version == op.pinned:
                        self.files[(op.name, v.version)] = (v.checkpoint_path, v.sha256, agent.body)
            me = registry.get_agent(s, agent_name)
            for v in me.versions:
                self.files[(SP.SELF, v.version)] = (v.checkpoint_path, v.sha256, me.body)
                self.own.append(v.version)
        self.files[(SP.SELF, 0)] = (theta0["path"], theta0["sha256"], cfg.body)
        with db.read() as s:  # env steps simulated so far (a meta-iteration simulates several phases)
            self.env_steps = store_runs.last_env_steps(s, run_id)

    def pool(self) -> list[tuple[str, str, list[int]]]:
        out = []
        for op in self.opponents:
            if op.name == SP.SELF:
                out.append((SP.SELF, self.cfg.body, list(self.own)))
            else:
                out.append((op.name, op.body, sorted(v for (n, v) in self.files if n == op.name)))
        return out

    def load_opponent(self, name: str, version: int) -> OpponentPolicy:
        key = (name, version)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        path, sha, body = self.files[key]
        ck = load_checkpoint(path, sha)
        display = f"{self.agent_name if name == SP.SELF else name}@{version}"
        opp = OpponentPolicy(display, body, ck.spec.to_dict(), {k: v.numpy() for k, v in ck.params.items()},
                             nz.to_numpy(ck.obs_stats))
        self._cache[key] = opp
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return opp

    def save_iteration(self, k: int, learner: SP.Learner, metrics: dict, snapshot: bool) -> None:
        cfg = self.cfg
        summary = {key: metrics.get(key) for key in ("win_rate", "mean_return", "episodes", "alpha")}
        self.env_steps += SP.iteration_env_steps(metrics, cfg.steps_per_iteration)
        metrics["env_steps_total"] = self.env_steps
        version_file, digest = commit_iteration(
            self.db, self.run_id, self.agent_name, k, learner, metrics, snapshot, body=cfg.body,
            strategy=cfg.strategy, env_steps=self.env_steps, summary=summary,
            ckpt_meta={"reward_scale": cfg.reward_scale}, owner=self.owner)
        if snapshot:
            self.files[(SP.SELF, k)] = (str(version_file), digest, cfg.body)
            self.own.append(k)


def commit_iteration(db: Database, run_id: int, agent_name: str, k: int, learner: SP.Learner, metrics: dict,
                     snapshot: bool, *, body: str, strategy: str, env_steps: int, summary: dict,
                     ckpt_meta: dict | None = None, owner: str | None = None) -> tuple[Path | None, str | None]:
    """Persist iteration k of any training run (sumo or locomotion): the version's checkpoint when
    ``snapshot``, the learner state, then one transaction with the Iteration row, the Version row
    and the run's progress. Returns the version's checkpoint path and SHA-256 (None, None without
    a snapshot). ``owner``: the claim of the process writing (:func:`ownership.claim`), checked before the
    files are written and again in the transaction."""
    if owner is not None:
        with db.read() as s:
            store_runs.check_owner(s, run_id, owner)
    version_file = digest = None
    if snapshot:
        params, stats = learner.policy()
        version_file = checkpoint_file(db, agent_name, k)
        digest = save_checkpoint(
            version_file, checkpoint_tensors(params, stats, learner.snapshot_extras()), learner.spec,
            body=body, strategy=strategy,
            metadata={"agent": agent_name, "version": k, "iteration": k, "run_id": run_id, **(ckpt_meta or {})},
        )
    state = save_learner_state(db, run_id, k, learner)
    with db.write() as s:
        store_runs.add_iteration(s, run_id, k, env_steps, float(metrics.get("wall_seconds", 0.0)), metrics)
        if snapshot:
            agent = registry.get_agent(s, agent_name)
            registry.add_version(s, agent, k, str(version_file), digest, iteration=k, metrics=summary, run_id=run_id)
        run = store_runs.get_run(s, run_id, RUN_KIND)
        store_runs.set_run_status(s, run_id, "running", done=k, state={**(run.state or {}), "learner": state},
                                  owner=owner)
    _drop_old_learner_states(db, run_id, keep=k)
    return version_file, digest


def save_learner_state(db: Database, run_id: int, k: int, learner: SP.Learner) -> dict:
    tensors, meta = learner.state()
    path = _run_dir(db, run_id) / f"learner-{k:05d}"
    sha = save_checkpoint(path, tensors, learner.spec, metadata={"kind": "learner-state", "run_id": run_id,
                                                                 "iteration": k, "learner": meta})
    return {"iteration": k, "path": str(path), "sha256": sha}


def _drop_old_learner_states(db: Database, run_id: int, keep: int) -> None:
    for p in _run_dir(db, run_id).glob("learner-*.safetensors"):
        k = int(p.name.split("-")[1].split(".")[0])
        if k < keep:
            for f in checkpoint_paths(p):
                f.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------------
# runs


def create_run(db: Database, cfg: SP.TrainConfig, agent_name: str, opponents: list[Opponent]) -> int:
    """The Run and Agent rows. Call after :func:`check_new_run`. theta_0 and the learner's initial
    state (derived from the seed) are written when :func:`run_training` starts, where a Ctrl-C
    leaves a run that resumes."""
    config = {"train": cfg.to_dict(), "agent": agent_name,
              "opponents": [{"name": o.name, "body": o.body, "pinned": o.pinned} for o in opponents]}
    with db.write() as s:
        run_id = store_runs.create_run(s, RUN_KIND, config, cfg.seed, cfg.iterations, __version__)
        registry.create_agent(s, agent_name, cfg.body, cfg.arch, cfg.strategy, "trained",
                              {"run_id": run_id, "config": cfg.to_dict()})
    return run_id


def _write_start(db: Database, run_id: int, cfg: SP.TrainConfig, agent_name: str, learner: SP.Learner) -> dict:
    return write_start(db, run_id, agent_name, learner, body=cfg.body, strategy=cfg.strategy,
                       ckpt_meta={"reward_scale": cfg.reward_scale})


def write_start(db: Database, run_id: int, agent_name: str, learner: SP.Learner, *, body: str, strategy: str,
                ckpt_meta: dict | None = None) -> dict:
    """theta_0 (``<agent>/v00000``) and the learner's initial state; the run's state points at both."""
    params, stats = learner.policy()
    path = checkpoint_file(db, agent_name, 0)
    sha = save_checkpoint(path, checkpoint_tensors(params, stats, learner.snapshot_extras()), learner.spec,
                          body=body, strategy=strategy,
                          metadata={"agent": agent_name, "version": 0, "iteration": 0, "run_id": run_id,
                                    **(ckpt_meta or {})})
    state = {"theta0": {"path": str(path), "sha256": sha}, "learner": save_learner_state(db, run_id, 0, learner)}
    with db.write() as s:
        store_runs.set_run_status(s, run_id, "running", done=0, state=state)
    return state


def resumable_run(db: Database, run_id: int, section: str, extend_to: int | None = None) -> tuple[dict, str, int]:
    """The stored configuration (``config[section]``), agent name and iterations done of a training
    run that can be resumed. ``extend_to``: first raise its planned iterations to this many (a
    finished run continues exactly as if it had been started with them: no schedule depends on the
    total); it must exceed the planned ones."""
    with db.read() as s:
        run = store_runs.get_run(s, run_id, RUN_KIND)
        if extend_to is None and run.status == "finished":
            raise UserError(f"training run {run_id} already finished all {run.progress_total} iterations; train it "
                            f"further with --resume {run_id} --iterations N (N > {run.progress_total})")
        if extend_to is not None and extend_to <= run.progress_total:
            raise UserError(f"training run {run_id} already plans {run.progress_total} iterations; --iterations must "
                            "be more to extend it")
        ownership.check_not_running(run)
    if extend_to is not None:
        with db.write() as s:
            store_runs.extend_run(s, run_id, section, extend_to)
    with db.read() as s:
        run = store_runs.get_run(s, run_id, RUN_KIND)
        return run.config[section], run.config["agent"], run.progress_done


def check_resume(db: Database, run_id: int, extend_to: int | None = None) -> tuple[SP.TrainConfig, str, int]:
    """:func:`resumable_run` of a RoboSumo training run, its configuration parsed."""
    cfg, agent, done = resumable_run(db, run_id, "train", extend_to)
    return SP.TrainConfig.from_dict(cfg), agent, done


def restore_learner(learner, state: dict) -> int:  # noqa: ANN001
    """Load the learner state that run ``state`` last stored (SHA-256 checked) into ``learner``, and
    return the iteration it ends."""
    saved = state["learner"]
    ck = load_checkpoint(saved["path"], saved["sha256"])
    learner.load_state(ck.tensors, ck.metadata["learner"])
    return int(saved["iteration"])


def run_training(db: Database, run_id: int, executor, on_iteration: Callable[[SP.Progress], None] | None = None) -> dict:
    """Train run ``run_id`` from where it stands to its last iteration. Ctrl-C: the run is marked
    interrupted and :class:`TrainingInterrupted` is raised (everything committed so far stays)."""
    with db.read() as s:
        run = store_runs.get_run(s, run_id, RUN_KIND)
        cfg = SP.TrainConfig.from_dict(run.config["train"])
        agent_name = run.config["agent"]
        opponents = [Opponent(o["name"], o["body"], o["pinned"]) for o in run.config["opponents"]]
        state = dict(run.state or {})
    factory = SP.learner_factory(cfg.strategy)
    if factory is None:
        raise UserError(f"training with strategy {cfg.strategy!r} is not available in this sumo")
    owner = ownership.claim(db, run_id)
    try:  # the set-up takes seconds (torch, the start files): a Ctrl-C there leaves a run to resume too
        learner = factory(SP.policy_spec(cfg), cfg)
        if "theta0" not in state:  # a new run, or one stopped before they were written: derived from the seed
            if cfg.init_from:  # or taken from a stored version
                warm_start(db, learner, cfg.init_from)
            state = _write_start(db, run_id, cfg, agent_name, learner)
        start = restore_learner(learner, state)
        if cfg.teacher:
            learner.teacher = load_teacher(db, cfg.teacher)
        store = DbTrainStore(db, run_id, agent_name, cfg, opponents, state["theta0"], owner=owner)
        with db.write() as s:
            store_runs.set_run_status(s, run_id, "running", done=start, owner=owner)
    except KeyboardInterrupt:
        raise interrupted(db, run_id, cfg.iterations, owner) from None
    t0 = time.perf_counter()
    history: list[SP.Progress] = []

    def report(p: SP.Progress) -> None:
        history.append(p)
        _after_iteration(p)
        if on_iteration is not None:
            on_iteration(p)

    drive(db, run_id, cfg.iterations, lambda: SP.train(cfg, learner, store, executor, start=start, on_iteration=report),
          owner)
    wall = time.perf_counter() - t0
    steps = sum(SP.iteration_env_steps(p.metrics, cfg.steps_per_iteration) for p in history)
    last = history[-1].metrics if history else {}
    return {
        "run_id": run_id, "agent": agent_name, "body": cfg.body, "arch": cfg.arch, "strategy": cfg.strategy,
        "status": "finished", "iterations": cfg.iterations, "resumed_from": start,
        "env_steps": store.env_steps, "steps_per_iteration": cfg.steps_per_iteration,
        "latest_version": cfg.iterations, "wall_seconds": round(wall, 3),
        "steps_per_second": round(steps / wall, 1) if wall > 0 and steps else None,
        "last_iteration": {k: last.get(k) for k in ("win_rate", "draw_rate", "loss_rate", "mean_return",
                                                    "mean_length", "episodes", "alpha")},
    }


def drive(db: Database, run_id: int, total: int, loop: Callable[[], object], owner: str | None = None) -> None:
    """Run a training loop and keep the run's status true: Ctrl-C marks it interrupted and raises
    :class:`TrainingInterrupted` (what was committed stays), an error marks it failed, the end
    marks it finished; each releases the run. A run taken over by another process is left to it."""
    try:
        loop()
    except KeyboardInterrupt:
        raise interrupted(db, run_id, total, owner) from None
    except store_runs.RunTakenOver:
        raise
    except BaseException:
        with db.write() as s:
            store_runs.set_run_status(s, run_id, "failed", owner=owner)
        raise
    with db.write() as s:
        store_runs.set_run_status(s, run_id, "finished", done=total, owner=owner)


def interrupted(db: Database, run_id: int, total: int, owner: str | None = None) -> TrainingInterrupted:
    """Mark run ``run_id`` interrupted and release it; the exception that says how far it got."""
    with db.write() as s:
        store_runs.set_run_status(s, run_id, "interrupted", owner=owner)
        done = store_runs.get_run(s, run_id).progress_done
    return TrainingInterrupted(run_id, done, total)


def run_env(db: Database, run_id: int) -> str:
    """The environment a training run trains on: ``sumo`` or ``locomotion``."""
    with db.read() as s:
        run = store_runs.get_run(s, run_id, RUN_KIND)
        return str((run.config or {}).get("env", "sumo"))


def _after_iteration(progress: SP.Progress) -> None:
    """Called after every committed iteration (tests replace it to simulate an interruption)."""
