"""The report's Fig. 8: the shares of each kind of agent per generation of a stored evolution."""

from __future__ import annotations

import shlex
from pathlib import Path

from sumo_cli.report import figures as F
from sumo_cli.report.section import Figure, Section, md_table, verdict

FINDING = ("Many kinds of agents quickly disappear from an initially uniform population and the meta-learners end "
           "up dominating (paper, Sec. 5.3, Fig. 8).")


def command(run: dict) -> str:
    """The command that reproduces a stored evolution run exactly."""
    c, g = run["config"], run["config"].get("game", {})
    names = ",".join(m["name"] for m in c["members"])
    return (f"sumo evolve --agents {shlex.quote(names)} --copies {c['copies']} --generations {c['generations']} "
            f"--matches {c['matches']} --rounds {g.get('rounds')} --episodes {g.get('episodes')} "
            f"--physics {g.get('physics')} --seed {run['seed']}")


def with_combinations(history: list[dict]) -> list[dict]:
    """Each generation's shares with a "combination" (arch-strategy, over all bodies) grouping added."""
    out = []
    for h in history:
        combo: dict[str, float] = {}
        for kind, share in h["kind"].items():
            key = kind.split("-", 1)[1]  # body-arch-strategy: bodies have no hyphen
            combo[key] = combo.get(key, 0.0) + share
        out.append({**h, "combination": dict(sorted(combo.items()))})
    return out


def section(db, run: dict, out: Path) -> Section | None:  # noqa: ANN001
    """Fig. 8 for one stored evolution with at least one finished generation (None otherwise)."""
    from sumo_cli.compete.results import evolution_results

    history = with_combinations(evolution_results(db, run["id"])["generations"])
    if len(history) < 2:
        return None
    c, g = run["config"], run["config"].get("game", {})
    slots = len(c["members"]) * c["copies"]
    sec = Section("fig8", f"Fig. 8: evolution of a population (evolution run {run['id']})", FINDING,
                  runs=[run["id"]], commands=[command(run)])
    sec.body.append(
        f"Run {run['id']} ({run['status']}): {len(c['members'])} agents x {c['copies']} copies = {slots} members, "
        f"{len(history) - 1} of {c['generations']} generations of {c['matches']} games, each {g.get('rounds')} rounds x "
        f"{g.get('episodes')} bouts ({g.get('physics')} physics), seed {run['seed']}. One run: the spread over seeds "
        "needs more runs with other --seed values.")
    file = f"evolution-{run['id']}-shares.png"
    F.population_shares(history, out / file, f"evolution run {run['id']}: {slots} members")
    sec.figures.append(Figure(file, "Share of the population per generation, by policy/adaptation combination (left) "
                                    "and by body (right)."))
    first, last = history[0]["strategy"], history[-1]["strategy"]
    kinds = sorted(set(first) | set(last))
    sec.body += ["", *md_table(["strategy", "generation 0", f"generation {len(history) - 1}"],
                               [[k, f"{first.get(k, 0):.1%}", f"{last.get(k, 0):.1%}"] for k in kinds])]
    claim = "meta-learners end up dominating"
    if first.get("meta", 0.0) == 0.0:
        sec.verdicts.append(verdict(claim, None, "the population holds no meta-learning agent"))
    else:
        top = max(last, key=last.get)
        grew = last.get("meta", 0.0) > first["meta"]
        sec.verdicts.append(verdict(claim, grew and top == "meta",
                                    f"meta share {first['meta']:.0%} -> {last.get('meta', 0):.0%}; largest strategy "
                                    f"at the end: {top} ({last[top]:.0%})"))
    gone = [k for k, v in history[0]["combination"].items() if history[-1]["combination"].get(k, 0.0) == 0.0]
    extinct = [k for k, v in history[0]["kind"].items() if history[-1]["kind"].get(k, 0.0) == 0.0]
    sec.verdicts.append(verdict("many kinds quickly disappear", len(extinct) > 0,
                                f"{len(extinct)} of {len(history[0]['kind'])} kinds (body x combination) are gone "
                                f"after {len(history) - 1} generations" + (f"; combinations gone: {', '.join(gone)}"
                                                                           if gone else "")))
    return sec
