"""The paper's experiments as `sumo` commands: for each one the database holds no run of, the command
that runs it at the paper's scale, and (when the database has the agents for it) a small version
for a first look and for tests (`sumo report --run --quick`)."""

from __future__ import annotations

import shlex

from sumo_cli import names
from sumo_cli.compete.paper_defaults import CALIBRATION_AGENTS, LEARNING_OPPONENTS, PAPER_EPISODES
from sumo_cli.report import evolution as EV
from sumo_cli.report import locomotion as LO
from sumo_cli.report import tournament as TO
from sumo_cli.report.section import Missing

#: The quick tournament: this many agents at most (the database's sumo agents, by name), this many
#: random games of these many rounds x bouts, on the fast physics.
QUICK_TOURNAMENT = {"agents": 9, "matches": 24, "rounds": 3, "episodes": 1, "physics": "fast"}
#: The quick evolution: agents, copies of each, generations, games per generation, rounds x bouts.
QUICK_EVOLUTION = {"agents": 6, "copies": 2, "generations": 3, "matches": 6, "rounds": 3, "episodes": 1,
                   "physics": "fast"}
#: The quick locomotion evaluation: repeats of the 7-episode sequence per agent and pair.
QUICK_LOCOMOTION_REPEATS = 3
#: The quick Fig. 5: one LSTM agent without and with tracking against the LSTMs of the other bodies,
#: games of these many rounds x bouts, repeated.
QUICK_ADAPTATION = {"rounds": 4, "episodes": 1, "repeats": 3, "physics": "fast"}
#: The quick Fig. 6: the same pair of agents against one learning opponent, two numbers of bouts a round.
QUICK_SAMPLE = {"rounds": 4, "episodes": "1,3", "repeats": 2, "physics": "fast"}
#: The quick calibration: one agent of each body, every cross-body pair this many times.
QUICK_CALIBRATION = {"rounds": 3, "episodes": 1, "repeats": 2, "physics": "fast"}
#: The quick Fig. 3 on a database without locomotion agents: toy ones (the paper's three strategies)
#: trained for a few seconds each, named with this prefix so they never take the paper's names.
QUICK_LOCOMOTION_TRAIN = {"iterations": 2, "envs": 2, "horizon": 20, "hidden": 16}
QUICK_LOCOMOTION_PREFIX = "toy-"
#: The paper's locomotion agents: the MLP policy without adaptation, with tracking, meta-learned.
PAPER_LOCOMOTION = ("loco-mlp", "loco-mlp-track", "loco-mlp-meta")


def sumo_agents(catalogue: list[dict], limit: int) -> list[str]:
    """Up to ``limit`` RoboSumo agents of the database as name@version (the version a bare name
    plays), spread over the bodies: one of each body in turn, by name."""
    by_body: dict[str, list[dict]] = {}
    for a in catalogue:
        if a["body"] in names.BODIES:
            by_body.setdefault(a["body"], []).append(a)
    picked: list[str] = []
    queues = [sorted(v, key=lambda a: a["name"]) for _, v in sorted(by_body.items())]
    while len(picked) < limit and any(queues):
        for q in queues:
            if q and len(picked) < limit:
                a = q.pop(0)
                picked.append(f"{a['name']}@{a['plays']}")
    return picked


def _focus(catalogue: list[dict]) -> tuple[str | None, list[str], list[str]]:
    """For the quick game experiments: an LSTM agent (the first body's canonical one if stored),
    the LSTMs of the other bodies as its learning opponents, and one agent of each body."""
    sumo = [a for a in catalogue if a["body"] in names.BODIES]
    by_body: dict[str, list[dict]] = {}
    for a in sorted(sumo, key=lambda a: (a["arch"] != "lstm", a["name"] != f"{a['body']}-lstm", a["name"])):
        by_body.setdefault(a["body"], []).append(a)
    bodies = [b for b in names.BODIES if b in by_body]
    if not bodies:
        return None, [], []
    focus = by_body[bodies[0]][0]
    opponents = [by_body[b][0]["name"] for b in bodies[1:]]
    return focus["name"], opponents, [by_body[b][0]["name"] for b in bodies]


def _tail(workers: int | None) -> str:
    return f" -j {workers}" if workers else ""


def missing(catalogue: list[dict], have: set[str], workers: int | None = None) -> list[Missing]:
    """What the database holds no run of (``have``: the section keys the report could draw), with
    the command for each and the agents that command needs and the database lacks."""
    out: list[Missing] = []
    stored = {a["name"] for a in catalogue}

    def lacking(needed) -> list[str]:  # noqa: ANN001
        return [n for n in needed if n not in stored]

    if "fig3" not in have:
        loco = [a["name"] for a in catalogue if a["body"] == names.LOCOMOTION]
        q = QUICK_LOCOMOTION_TRAIN
        train = [] if loco else [
            f"sumo train --env locomotion --arch mlp --strategy {st} --name {QUICK_LOCOMOTION_PREFIX}{name} "
            f"--iterations {q['iterations']} --envs {q['envs']} --horizon {q['horizon']} --hidden {q['hidden']} --seed 0"
            for st, name in zip(("none", "track", "meta"), PAPER_LOCOMOTION)]
        players = loco or [QUICK_LOCOMOTION_PREFIX + n for n in PAPER_LOCOMOTION]
        quick = " && ".join([*train, f"sumo eval locomotion {' '.join(players)} --repeats {QUICK_LOCOMOTION_REPEATS} "
                                     "--seed 0"])
        out.append(Missing(
            "fig3", "Fig. 3: nonstationary locomotion", LO.FINDING, "no `sumo eval locomotion` run is stored" +
            ("" if loco else ", and the database has no locomotion agents to evaluate (train them with "
                             "`sumo train --env locomotion --arch mlp --strategy none|track|meta`; the quick version "
                             f"trains toy ones named {QUICK_LOCOMOTION_PREFIX}*)"),
            f"sumo eval locomotion {' '.join(PAPER_LOCOMOTION)} --repeats 50 --seed 0", quick,
            lacking(PAPER_LOCOMOTION)))
    players = sumo_agents(catalogue, QUICK_TOURNAMENT["agents"])
    if "fig7" not in have:
        q = QUICK_TOURNAMENT
        quick = (f"sumo tournament --agents {shlex.quote(','.join(players))} --matches {q['matches']} "
                 f"--rounds {q['rounds']} --episodes {q['episodes']} --physics {q['physics']} --seed 0"
                 + _tail(workers)) if len(players) >= 2 else None
        out.append(Missing("fig7", "Fig. 7, the top-5 table and the win-rate matrix with Nash averaging",
                           TO.FIG7_FINDING, "no tournament with a rated game is stored",
                           "sumo tournament --matches 1000 --rounds 100 --episodes 3 --seed 0" + _tail(workers), quick,
                           lacking(names.all_combination_names())))
    focus, opponents, one_each = _focus(catalogue)
    everyone = ",".join(names.all_combination_names())
    paper_opps = ",".join(LEARNING_OPPONENTS)
    calibration = ",".join(CALIBRATION_AGENTS)
    from sumo_cli.report import adaptation as AD
    from sumo_cli.report import calibration as CA

    if "fig5" not in have:
        q = QUICK_ADAPTATION
        quick = (f"sumo experiment adaptation --agents {focus},{focus}:track --opponents {','.join(opponents)} "
                 f"--rounds {q['rounds']} --episodes {q['episodes']} --repeats {q['repeats']} --physics {q['physics']} "
                 "--seed 0" + _tail(workers)) if focus and opponents else None
        out.append(Missing("fig5", "Fig. 5: adaptation against learning opponents", AD.FIG5_FINDING,
                           "no `sumo experiment adaptation` run is stored",
                           f"sumo experiment adaptation --agents {everyone} --opponents {paper_opps} --rounds 100 "
                           "--episodes 3 --repeats 100 --seed 0" + _tail(workers), quick,
                           lacking(names.all_combination_names())))
    if "fig6" not in have:
        q = QUICK_SAMPLE
        quick = (f"sumo experiment sample-complexity --agents {focus},{focus}:track --opponents {opponents[-1]} "
                 f"--episodes {q['episodes']} --rounds {q['rounds']} --repeats {q['repeats']} --physics {q['physics']} "
                 "--seed 0" + _tail(workers)) if focus and opponents else None
        out.append(Missing("fig6", "Fig. 6: sample complexity", AD.FIG6_FINDING,
                           "no `sumo experiment sample-complexity` run is stored",
                           f"sumo experiment sample-complexity --agents {everyone} --opponents {paper_opps} "
                           f"--episodes {','.join(map(str, PAPER_EPISODES))} --rounds 100 --repeats 20 --seed 0" + _tail(workers), quick,
                           lacking(names.all_combination_names())))
    if "fig8" not in have:
        q = QUICK_EVOLUTION
        base = sumo_agents(catalogue, q["agents"])
        quick = (f"sumo evolve --agents {shlex.quote(','.join(base))} --copies {q['copies']} "
                 f"--generations {q['generations']} --matches {q['matches']} --rounds {q['rounds']} "
                 f"--episodes {q['episodes']} --physics {q['physics']} --seed 0" + _tail(workers)) if len(base) >= 2 else None
        out.append(Missing("fig8", "Fig. 8: evolution of a population", EV.FINDING,
                           "no evolution with a finished generation is stored",
                           "sumo evolve --copies 10 --generations 10 --matches 1000 --seed 0" + _tail(workers), quick,
                           lacking(names.all_combination_names())))
    if "calibration" not in have:
        q = QUICK_CALIBRATION
        quick = (f"sumo experiment calibration --agents {','.join(one_each)} --rounds {q['rounds']} "
                 f"--episodes {q['episodes']} --repeats {q['repeats']} --physics {q['physics']} --seed 0"
                 + _tail(workers)) if len(one_each) >= 2 else None
        out.append(Missing("calibration", "Calibration of the bodies", CA.FINDING,
                           "no `sumo experiment calibration` run is stored",
                           f"sumo experiment calibration --agents {calibration} --rounds 100 --episodes 3 --repeats 20 "
                           "--seed 0" + _tail(workers), quick, lacking(CALIBRATION_AGENTS)))
    return out
