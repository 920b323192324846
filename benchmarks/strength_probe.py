"""Is a bout won by force or by technique? Faithful bouts with either agent's motors made stronger or
weaker.

``python -m benchmarks.strength_probe --a ant-lstm@345 --b zoo-ant-lstm-v3 --gears 1:1,2:1,1:0.5``
plays the same seeded bouts of A against B (:func:`sumo_cli.compete.bouts.play_bouts`, the faithful
physics, rules and standard start) once per setting ``gear_a:gear_b``, with every motor gear of that
agent multiplied by the factor (RoboSumo's gear is 150 for every body). Nothing else of the bout
changes: the policies see the same observations and act as they were trained. Reported per setting:
A's won / drawn / lost bouts.

A and B come from the database (``--db``): the shipped agents, or any other it holds (the zoo's,
once imported).
"""

from __future__ import annotations

import argparse
import contextlib
import json

from sumo_cli.compete.bouts import play_bouts
from sumo_cli.compete.game import AgentData
from sumo_cli.library import load_agent
from sumo_cli.shipped import register_shipped
from sumo_cli.sim import sumo_env
from sumo_cli.sim.bodies import body_spec
from sumo_cli.store.database import Database


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


def parse_gears(text: str) -> list[tuple[float, float]]:
    out = []
    for item in text.split(","):
        a, _, b = item.partition(":")
        out.append((float(a), float(b or 1.0)))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default="db/sumo.sqlite", help="SQLAlchemy URL or SQLite path")
    ap.add_argument("--a", required=True, help="agent A (name or name@version)")
    ap.add_argument("--b", required=True, help="agent B (name or name@version)")
    ap.add_argument("--gears", default="1:1,2:1,1:0.5", help="settings gear_a:gear_b, comma-separated")
    ap.add_argument("--bouts", type=int, default=24)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    try:
        gears = parse_gears(args.gears)
    except ValueError:
        ap.error(f"--gears takes settings like 1:1,2:1,1:0.5, got {args.gears!r}")
    if any(g <= 0 for pair in gears for g in pair):
        ap.error("every gear factor must be positive")

    url = args.db if "://" in args.db else f"sqlite:///{args.db}"
    db = Database(url)
    register_shipped(db)
    a = AgentData.from_loaded(load_agent(db, args.a))
    b = AgentData.from_loaded(load_agent(db, args.b))
    rows = []
    for gear_a, gear_b in gears:
        with scaled_gears(gear_a, gear_b):
            outcomes = [bout.outcome for bout in play_bouts(a, b, args.bouts, args.seed)]
        rows.append({"gear_a": gear_a, "gear_b": gear_b, "won": outcomes.count("win"),
                     "drawn": outcomes.count("draw"), "lost": outcomes.count("loss")})
    if args.json:
        print(json.dumps({"a": args.a, "b": args.b, "bouts": args.bouts, "seed": args.seed, "rows": rows}, indent=2))
        return
    print(f"{args.a} against {args.b}: {args.bouts} faithful bouts, seed {args.seed}")
    for r in rows:
        print(f"  gear A x{r['gear_a']:g}, B x{r['gear_b']:g}: won {r['won']} / drawn {r['drawn']} / lost {r['lost']}")


if __name__ == "__main__":
    main()
