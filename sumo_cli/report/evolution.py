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
    """Fig. 8 for one stored evolution with at least one game played (None otherwise): the finished
    generations drawn, and the generation in play as its played games leave the shares."""
    from sumo_cli.compete.results import evolution_results

    results = evolution_results(db, run["id"])
    history = with_combinations(results["generations"])
    now = results["current"] if results["current"] and results["current"]["played"] else None
    if len(history) < 2 and now is None:
        return None
    c, g = run["config"], run["config"].get("game", {})
    slots = len(c["members"]) * c["copies"]
    sec = Section("fig8", f"Fig. 8: evolution of a population (evolution run {run['id']})", FINDING,
                  runs=[run["id"]], commands=[command(run)])
    in_play = (f"; generation {now['generation']} in play: {now['played']} of {now['games']} games played" if now
               else "")
    sec.body.append(
        f"Run {run['id']} ({run['status']}): {len(c['members'])} agents x {c['copies']} copies = {slots} members, "
        f"{len(history) - 1} of {c['generations']} generations of {c['matches']} games{in_play}, each "
        f"{g.get('rounds')} rounds x {g.get('episodes')} bouts ({g.get('physics')} physics), seed {run['seed']}. One "
        "run: the spread over seeds needs more runs with other --seed values.")
    if len(history) >= 2:
        file = f"evolution-{run['id']}-shares.png"
        F.population_shares(history, out / file, f"evolution run {run['id']}: {slots} members")
        sec.figures.append(Figure(file, "Share of the population per generation, by policy/adaptation combination "
                                        "(left) and by body (right)."))
    columns = {"generation 0": history[0]}
    if len(history) >= 2:
        columns[f"generation {len(history) - 1}"] = history[-1]
    if now is not None:
        sec.body += ["", f"The last column is generation {now['generation']} as its {now['played']} played games "
                         "leave it (each loser's slot taken by a copy of its winner), were it to end now."]
        columns[f"generation {now['generation']} so far"] = with_combinations([now["shares"]])[0]
    for grouping in ("strategy", "combination", "body"):
        kinds = sorted({k for h in columns.values() for k in h[grouping]})
        sec.body += ["", *md_table([grouping, *columns],
                                   [[k, *(f"{h[grouping].get(k, 0):.1%}" for h in columns.values())] for k in kinds])]
    claim, quickly = "meta-learners end up dominating", "many kinds quickly disappear"
    if len(history) < 2:
        why = f"no generation is complete yet ({now['played']} of {now['games']} games of the first played)"
        sec.verdicts += [verdict(claim, None, why), verdict(quickly, None, why)]
        return sec
    first, last = history[0]["strategy"], history[-1]["strategy"]
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
    sec.verdicts.append(verdict(quickly, len(extinct) > 0,
                                f"{len(extinct)} of {len(history[0]['kind'])} kinds (body x combination) are gone "
                                f"after {len(history) - 1} generations" + (f"; combinations gone: {', '.join(gone)}"
                                                                           if gone else "")))
    return sec
