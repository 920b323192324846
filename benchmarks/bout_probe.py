"""What decides a bout? The same seeded faithful bouts of A against B, with one thing changed at a time.

``python -m benchmarks.bout_probe --a ant-lstm@345 --b zoo-ant-lstm-v3 --settings none,gear=1:0.5,reset=1,hold=4``
plays ``--bouts`` bouts of A against B per setting, under the faithful physics, rules and standard
start, with the seeds and action noise of ``sumo eval sumo`` (so ``none`` gives its numbers):

- ``none``: nothing changed;
- ``gear=GA:GB``: every motor gear of A multiplied by GA and of B by GB (RoboSumo's gear is 150 for
  every body); the policies act as they were trained: is it won by force?
- ``reset=K``: B's recurrent state set back to its initial (zero) state every K steps: does B's
  memory matter, and over how many steps?
- ``swap=K``: every K steps B's recurrent state is exchanged for the one B has in the next bout of
  the batch (a state B really reaches, but from another bout): does what B's memory holds matter,
  or only that it is a state B knows?
- ``window=K``: B's memory is only ever its last K steps: every step B's state is recomputed from its
  initial state over its previous K - 1 observations (``window=1`` is ``reset=1``): is what B remembers
  a few steps of its recent past (which a stack of recent frames could also give), or longer?
- ``erase=PART:K``: ``window=K`` with one part of B's past erased: in the K - 1 observations its state
  is recomputed over, ``PART`` (``qpos``, ``qvel``, ``contacts`` of its own body, ``opponent``, or
  ``all``) holds its present values: is it that part's recent past that B plays from, or (``all``)
  only a state warmed up over a few steps?
- ``hold=H``: B sees A's torso pose (position and orientation, the 7 numbers of the observation
  about the opponent's torso) updated only every H steps, held in between: does B follow A's motion
  (a velocity only memory can give) or only where A is?

Reported per setting: A's won / drawn / lost bouts. A and B come from the database (``--db``): the
shipped agents, or any other it holds (the zoo's, once imported).
"""

from __future__ import annotations

import argparse
import contextlib
import json

import numpy as np

from sumo_cli.compete.bouts import _actor
from sumo_cli.compete.game import AgentData
from sumo_cli.compete.schedule import game_seed
from sumo_cli.errors import UserError
from sumo_cli.selfplay.sumo_vec import CurriculumSumo
from sumo_cli.store.library import load_agent
from sumo_cli.nets import features as F
from sumo_cli.store.shipped import register_shipped
from sumo_cli.sim import sumo_env
from sumo_cli.sim.bodies import body_spec
from sumo_cli.store.database import Database

OPPONENT_POSE = slice(-13, -6)  # the opponent torso's x, y, z and quaternion in an observation
PARTS = ("qpos", "qvel", "contacts", "opponent")


def part_slice(body: str, part: str) -> slice:
    """Where ``part`` lies in an original observation of ``body``: its own qpos, qvel and contact
    forces (6 per body), then the opponent's torso pose and forces; ``all``: everything."""
    if part == "all":
        return slice(None)
    b = body_spec(body)
    ends = np.cumsum([0, b.nq, b.nv, 6 * b.n_bodies])
    if part == "opponent":
        return slice(int(ends[3]), None)
    i = PARTS.index(part)
    return slice(int(ends[i]), int(ends[i + 1]))


@contextlib.contextmanager
def scaled_gears(gear_a: float, gear_b: float):
    """Every env built inside scales agent A's motor gears by gear_a and agent B's by gear_b."""
    build = sumo_env.build_model

    def build_scaled(body_a: str, body_b: str, physics: str):
        model = build(body_a, body_b, physics)
        n_a = body_spec(body_a).n_actions  # A's motors come first (BatchedSumo asserts it)
        model.actuator_gear[:n_a, 0] *= gear_a
        model.actuator_gear[n_a:, 0] *= gear_b
        return model

    sumo_env.build_model = build_scaled
    try:
        yield
    finally:
        sumo_env.build_model = build


def parse_setting(text: str) -> dict:
    """``none``, ``gear=GA:GB``, ``reset=K``, ``swap=K``, ``window=K``, ``erase=PART:K`` or ``hold=H`` as a dict; ValueError with the reason."""
    kind, _, value = text.strip().partition("=")
    if kind == "none" and not value:
        return {"kind": "none"}
    if kind == "gear":
        a, _, b = value.partition(":")
        gears = float(a), float(b or 1.0)
        if min(gears) <= 0:
            raise ValueError(f"gear factors must be positive: {text!r}")
        return {"kind": "gear", "gear_a": gears[0], "gear_b": gears[1]}
    if kind == "erase":
        part, _, k = value.partition(":")
        if part not in PARTS + ("all",) or not k.isdigit() or int(k) < 2:
            raise ValueError(f"erase takes PART:K with PART one of {', '.join(PARTS)} or all, and K >= 2: {text!r}")
        return {"kind": "erase", "part": part, "every": int(k)}
    if kind in ("reset", "swap", "window", "hold"):
        every = int(value)
        if every < 1:
            raise ValueError(f"{kind} takes a number of steps of at least 1: {text!r}")
        return {"kind": kind, "every": every}
    raise ValueError(f"unknown setting {text!r}; expected none, gear=GA:GB, reset=K, swap=K, window=K, erase=PART:K or hold=H")


def play(a: AgentData, b: AgentData, setting: dict, n: int, seed: int) -> dict:
    """``n`` bouts of A against B under ``setting``: A's won / drawn / lost, and each bout's length."""
    gears = (setting["gear_a"], setting["gear_b"]) if setting["kind"] == "gear" else (1.0, 1.0)
    reset = setting["every"] if setting["kind"] == "reset" else 0
    swap = setting["every"] if setting["kind"] == "swap" else 0
    hold = setting["every"] if setting["kind"] == "hold" else 1
    window = setting["every"] if setting["kind"] in ("window", "erase") else 0
    erased = part_slice(b.body, setting["part"]) if setting["kind"] == "erase" else None
    with scaled_gears(*gears):
        env = CurriculumSumo(a.body, b.body, n, physics="faithful", seed=seed, auto_reset=False, n_threads=1)
    rng = np.random.default_rng(game_seed(seed, 0xB0))  # the action noise of play_bouts
    (actor_a, std_a), (actor_b, std_b) = _actor(a), _actor(b)
    outcomes = np.zeros(n, dtype=int)
    lengths = np.zeros(n, dtype=int)
    try:
        obs_a, obs_b = env.reset(seed=seed)
        state_a, state_b = actor_a.initial_state(n), actor_b.initial_state(n)
        view_a, view_b = actor_a.spec.viewer(n), actor_b.spec.viewer(n)
        recent_b: list[np.ndarray] = []  # B's last window - 1 views (observations for erase), oldest first
        t = 0
        while not env.finished.all():
            live = ~env.finished
            if reset and t % reset == 0:
                state_b = actor_b.initial_state(n)
            if swap and t % swap == 0 and t > 0:
                state_b = tuple(np.roll(x, -1, axis=0) for x in state_b)
            if hold > 1:  # B's view of A's pose is refreshed every hold steps (t = 0 included)
                if t % hold == 0:
                    seen_pose = obs_b[:, OPPONENT_POSE].copy()
                obs_b = obs_b.copy()
                obs_b[:, OPPONENT_POSE] = seen_pose
            mean_a, state_a = actor_a.step(view_a.view(obs_a), state_a)
            seen_b = view_b.view(obs_b)
            if window:
                state_b = actor_b.initial_state(n)
                for past in recent_b:
                    if erased is not None:  # B's features have no past (main checks it)
                        past = past.copy()
                        past[:, erased] = obs_b[:, erased]
                        past = view_b.view(past)
                    _, state_b = actor_b.step(past, state_b)
                recent_b = (recent_b + [seen_b if erased is None else obs_b])[-(window - 1):] if window > 1 else []
            mean_b, state_b = actor_b.step(seen_b, state_b)
            act_a = mean_a + std_a * rng.standard_normal(mean_a.shape)
            act_b = mean_b + std_b * rng.standard_normal(mean_b.shape)
            res = env.step(act_a.astype(np.float64), act_b.astype(np.float64))
            t += 1
            ended = res.done & live
            outcomes[ended] = res.outcome[ended]
            lengths[ended] = res.length[ended]
            obs_a, obs_b = res.obs_a, res.obs_b
    finally:
        env.close()
    return {"won": int((outcomes == 1).sum()), "drawn": int((outcomes == 3).sum()), "lost": int((outcomes == 2).sum()),
            "lengths": lengths.tolist()}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default="db/sumo.sqlite", help="SQLAlchemy URL or SQLite path")
    ap.add_argument("--a", required=True, help="agent A (name or name@version)")
    ap.add_argument("--b", required=True, help="agent B (name or name@version), the one that reset, swap, window, erase and hold change")
    ap.add_argument("--settings", default="none,gear=2:1,gear=1:0.5,hold=4",
                    help="comma-separated: none, gear=GA:GB, reset=K, swap=K, window=K, erase=PART:K, hold=H")
    ap.add_argument("--bouts", type=int, default=24)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    try:
        settings = [parse_setting(s) for s in args.settings.split(",")]
    except ValueError as e:
        ap.error(str(e))
    if args.bouts < 1:
        ap.error("--bouts must be at least 1")

    db = Database(args.db if "://" in args.db else f"sqlite:///{args.db}")
    register_shipped(db)
    try:
        a, b = (AgentData.from_loaded(load_agent(db, name)) for name in (args.a, args.b))
    except UserError as e:
        ap.error(str(e))
    if {"reset", "swap", "window", "erase"} & {s["kind"] for s in settings} and b.spec["arch"] == "mlp":
        ap.error(f"reset=K, swap=K, window=K and erase=PART:K need a recurrent B; {args.b} is an MLP")
    if any(s["kind"] == "erase" for s in settings) and F.stateful(b.spec.get("features", F.NONE)):
        ap.error(f"erase=PART:K needs a B whose features have no past; {args.b} has {b.spec['features']}")
    rows = [{"setting": text, **play(a, b, s, args.bouts, args.seed)}
            for text, s in zip(args.settings.split(","), settings)]
    if args.json:
        print(json.dumps({"a": args.a, "b": args.b, "bouts": args.bouts, "seed": args.seed, "rows": rows}, indent=2))
        return
    print(f"{args.a} against {args.b}: {args.bouts} faithful bouts per setting, seed {args.seed}")
    for r in rows:
        print(f"  {r['setting']:>12}: won {r['won']} / drawn {r['drawn']} / lost {r['lost']}")


if __name__ == "__main__":
    main()
