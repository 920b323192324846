"""Runs a population plan (:mod:`sumo_cli.runs.population_plan`) against a database.

Each training step is a ``sumo train`` child process named as the step: a new run, or ``--resume`` of
the step's run when one exists and has not reached its iterations; a finished one is skipped. A
tracking step registers its source's versions under its own name with strategy ``track`` (the same
checkpoint files and hashes). Steps start in dependency order, file order among the ready ones, at
most ``workers`` at a time. The children hold their own runs, so the plan's progress is the
database's: killing this process (even with kill -9: the children get SIGTERM when it dies) and
starting it again continues exactly where each run stopped.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sumo_cli.errors import UserError
from sumo_cli.runs.population_plan import Plan, Step
from sumo_cli.store import ownership
from sumo_cli.store import registry
from sumo_cli.runs import population_shipped as PS
from sumo_cli.selfplay.new_run import new_run_config
from sumo_cli.store.database import Database
from sumo_cli.store.runs import find_run, iteration_totals, live_holder

TODO, PARTIAL, DONE, FAILED = "to do", "partial", "done", "failed"
#: a step whose run another live process holds (a `sumo train --resume` typed by hand, a second runner)
ELSEWHERE = "running elsewhere"
#: done by what shipped in policies/, not yet registered under the step's name (the runner does that first)
SHIPPED_DONE = "done (from shipped)"
_PR_SET_PDEATHSIG = 1


@dataclass
class StepState:
    step: Step
    state: str
    run_id: int | None = None
    done: int = 0  # iterations stored
    total: int | None = None  # planned iterations
    seconds: float = 0.0  # wall seconds its stored iterations took
    env_steps: int = 0
    run_total: int | None = None  # the iterations its run was created (or last extended) to
    shipped: int = 0  # of ``done`` and ``run_total``, the iterations shipped before its run (or its start)
    continues: str = ""  # PS.LOCAL (its run is here) or PS.SHIPPED (it starts from the shipped versions)
    shipped_step: PS.ShippedStep | None = None  # what shipped from it, when it is done or continues from that

    @property
    def rate(self) -> float | None:
        """Measured seconds per iteration, once it has some."""
        return self.seconds / (self.done - self.shipped) if self.done > self.shipped else None


def planned_iterations(step: Step) -> int:
    """The iterations a training step's `sumo train` child runs (its --iterations, else its recipe's)."""
    if not step.trains:
        return 0
    given = step.iterations()
    return new_run_config({} if given is None else {"iterations": given}, body=step.body, arch=step.arch,
                          strategy=step.strategy, recipe=step.option("--recipe")).iterations


def step_states(db: Database, plan: Plan) -> list[StepState]:
    """Where each step stands in ``db``."""
    out = []
    shipped = PS.shipped_steps(plan)
    with db.read() as s:
        for step in plan.steps:
            agent = registry.get_agent(s, step.name)
            if step.trains and (agent is None or PS.from_shipped(agent)) and step.name in shipped:
                out.append(_shipped_state(step, planned_iterations(step), shipped[step.name],
                                          PS.registered_as_shipped(s, agent, shipped[step.name])))
                continue
            if not step.trains:
                source = registry.get_agent(s, step.weights_of)
                have = {v.version for v in agent.versions} if agent else set()
                want = {v.version for v in source.versions} if source else None
                out.append(StepState(step, DONE if agent and want and have >= want else TODO))
                continue
            total = planned_iterations(step)
            if agent is None:
                out.append(StepState(step, TODO, total=total))
                continue
            run_id = (agent.origin or {}).get("run_id")
            run = find_run(s, run_id)
            offset = PS.continued_from(s, step, run.config or {}) if run is not None else 0
            total -= offset  # what its run is to do: a run continued from shipped began after ``offset`` iterations
            if run is None:
                raise UserError(f"the database has an agent {step.name!r} that no training run made; "
                                "use another database for this plan, or rename the step")
            n, wall, steps = iteration_totals(s, run.id)
            if run.progress_done >= total:
                state = DONE
            elif live_holder(run, ownership.is_alive) is not None:
                state = ELSEWHERE
            else:
                state = FAILED if run.status == "failed" else PARTIAL
            out.append(StepState(step, state, run.id, offset + run.progress_done, offset + total, float(wall),
                                 int(steps), None if run.progress_total is None else offset + run.progress_total,
                                 offset, PS.LOCAL if state != DONE else "", shipped.get(step.name)))
    return out


def _shipped_state(step: Step, total: int, ship: PS.ShippedStep, registered: bool) -> StepState:
    """A training step with no run here whose member shipped from it: done when the plan asks no more
    than shipped (registered under its name, or about to be), else it continues from the shipped versions."""
    if total <= ship.iterations:
        return StepState(step, DONE if registered else SHIPPED_DONE, None, ship.iterations, total,
                         shipped=ship.iterations, continues=PS.SHIPPED, shipped_step=ship)
    return StepState(step, TODO, None, ship.iterations, total, shipped=ship.iterations, continues=PS.SHIPPED,
                     shipped_step=ship)


def register_tracking(db: Database, step: Step) -> int:
    """Register (or bring up to date) a tracking step: its source's versions under its name with
    strategy track, sharing the checkpoint files. Returns how many versions it added."""
    added = 0
    with db.write() as s:
        source = registry.get_agent(s, step.weights_of)
        if source is None or not source.versions:
            raise UserError(f"{step.name} plays {step.weights_of}'s versions, and it has none yet")
        agent = registry.get_agent(s, step.name)
        if agent is None:
            agent = registry.create_agent(s, step.name, source.body, source.arch, "track", "trained",
                                          {"weights_of": step.weights_of, **{k: v for k, v in (source.origin or {}).items()
                                                                              if k == "run_id"}})
        have = {v.version for v in agent.versions}
        for v in source.versions:
            if v.version not in have:
                registry.add_version(s, agent, v.version, v.checkpoint_path, v.sha256, iteration=v.iteration,
                                     metrics={"env_steps": (v.metrics or {}).get("env_steps")} if v.metrics else None)
                added += 1
        registry.set_default_version(agent, source.default_version)
    return added


def eta_seconds(states: list[StepState], plan: Plan, workers: int) -> float:
    """Seconds left for the whole plan: each training step's iterations left at its measured rate
    (else its kind's rate of the plan, else the mean measured rate), spread over the workers."""
    measured = [st.rate for st in states if st.rate]
    fallback = sum(measured) / len(measured) if measured else 10.0
    left = 0.0
    for st in states:
        if not st.step.trains or st.state == DONE:
            continue
        rate = st.rate or plan.seconds_per_iteration.get(st.step.kind) or fallback
        left += max(0, (st.total or 0) - st.done) * rate
    return left / max(1, workers)


def _die_with_parent() -> None:  # runs in the child before exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except OSError:  # not Linux: a killed runner leaves its children running, and they finish their runs
        pass


def train_command(db_url: str, st: StepState, address: str | None) -> list[str]:
    """The ``sumo train`` child of a training step: resume its run, or start it."""
    base = [sys.executable, "-m", "sumo_cli", "--db", db_url, "train"]
    if st.run_id is not None:
        cmd = base + ["--resume", str(st.run_id)]
        if st.total and st.run_total is not None and st.total > st.run_total:  # the plan asks for more than the run had
            cmd += ["--iterations", str(st.total - st.shipped)]
    elif st.shipped_step is not None:  # its run is not here: it continues from what shipped
        cmd = base + PS.continue_options(st.step, st.shipped_step, st.total)
    else:
        cmd = base + ["--name", st.step.name, *st.step.train]
    cmd += ["-j", "1"]
    if address:
        cmd += ["--address", address]
    return cmd


@dataclass
class Child:
    step: Step
    proc: subprocess.Popen
    log: Path


class PlanInterrupted(Exception):
    pass


def run_plan(db: Database, plan: Plan, workers: int, address: str | None, log_dir: Path,
             on_update: Callable[[list[StepState], list[str]], None], poll: float = 2.0) -> list[StepState]:
    """Run every step not done; ``on_update(states, running names)`` after every change and every
    ``poll`` seconds. A step whose child fails stops the plan (the others finish their current step)
    and raises one sentence naming its log. Ctrl-C (KeyboardInterrupt) sends SIGTERM to every child,
    waits for them to save, and raises :class:`PlanInterrupted`."""
    log_dir.mkdir(parents=True, exist_ok=True)
    children: dict[str, Child] = {}
    failed: list[str] = []
    try:
        while True:
            for name, child in list(children.items()):
                code = child.proc.poll()
                if code is None:
                    continue
                del children[name]
                if code != 0:
                    failed.append(f"{name} (exit {code}; its log: {child.log})")
            states = step_states(db, plan)
            by_name = {st.step.name: st for st in states}
            changed = False
            if not failed:
                for step in plan.steps:
                    st = by_name[step.name]
                    if st.state in (DONE, ELSEWHERE) or step.name in children:
                        continue
                    if any(by_name[d].state != DONE for d in step.depends):
                        continue
                    if not step.trains:
                        register_tracking(db, step)
                        changed = True
                        continue
                    if st.state == SHIPPED_DONE:
                        PS.register(db, step, st.shipped_step)
                        changed = True
                        continue
                    if len(children) >= workers:
                        continue
                    if st.run_id is None and st.shipped_step is not None:
                        PS.unregister(db, step)  # registered from shipped in an earlier pass; now it trains on
                    log = log_dir / f"{step.name}.log"
                    with open(log, "a") as fh:
                        proc = subprocess.Popen(train_command(db.url, st, address), stdout=fh, stderr=subprocess.STDOUT,
                                                stdin=subprocess.DEVNULL, start_new_session=True,
                                                preexec_fn=_die_with_parent)
                    children[step.name] = Child(step, proc, log)
            if changed:  # a tracking step registered: its state (and what waits on it) is read again
                states = step_states(db, plan)
            on_update(states, sorted(children))
            if not children and not changed and not any(st.state == ELSEWHERE for st in states):
                if failed:
                    raise UserError(f"plan step {failed[0]} failed; fix it and run the same command again")
                if all(st.state == DONE for st in states):
                    return states
                stuck = [st.step.name for st in states if st.state != DONE]
                raise UserError(f"plan steps {', '.join(stuck)} cannot start: a step they depend on did not finish")
            time.sleep(poll)
    except KeyboardInterrupt:
        for child in children.values():
            if child.proc.poll() is None:
                child.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 120
        for child in children.values():
            try:
                child.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.proc.kill()
        raise PlanInterrupted() from None
