"""The report's Fig. 5 (win rate per round against learning opponents) and Fig. 6 (win rate over
the last rounds against the number of episodes per round), from `sumo experiment` runs."""

from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np

from sumo_cli.compete.paper_defaults import LAST_ROUNDS
from sumo_cli.report import figures as F
from sumo_cli.report import stats
from sumo_cli.report.section import Figure, Section, md_table, verdict

FIG5_FINDING = ("Against opponents that keep learning, meta-learned adaptation improves its win rate within about "
                "100 episodes, while the baselines' win rates often deteriorate over the game (paper, Sec. 5.2, Fig. 5).")
FIG6_FINDING = ("With more episodes per round, tracking improves (above about 50 it learns at test time), while the "
                "meta-learned strategy stays about the same from 3 to 90 episodes (paper, Sec. 5.2, Fig. 6).")
#: Share of the game's rounds at its start and at its end compared in Fig. 5's verdict.
EDGE_FRACTION = 0.25


def command(run: dict) -> str:
    c = run["config"]
    agents = ",".join(p["label"] for p in c["agents"])
    opps = ",".join(p["label"] for p in c["opponents"])
    if c["kind"] == "calibration":
        return (f"sumo experiment calibration --agents {shlex.quote(agents)} --rounds {c['rounds']} "
                f"--episodes {c['episodes'][0]} --repeats {c['repeats']} --physics {c['physics']} --seed {run['seed']}")
    eps = c["episodes"][0] if c["kind"] == "adaptation" else ",".join(map(str, c["episodes"]))
    return (f"sumo experiment {c['kind']} --agents {shlex.quote(agents)} --opponents {shlex.quote(opps)} "
            f"--rounds {c['rounds']} --episodes {eps} --repeats {c['repeats']} --physics {c['physics']} "
            f"--seed {run['seed']}")


def per_round(games: list[dict]) -> np.ndarray:
    """(games, rounds): the share of each round's bouts the agent won."""
    return np.array([[r["wins_a"] / max(1, r["wins_a"] + r["wins_b"] + r["draws"]) for r in g["rounds"]]
                     for g in games])


def grouped(db, run: dict) -> dict[tuple[int, int, int], list[dict]]:  # noqa: ANN001
    """(agent index, opponent index, episodes per round) -> the run's finished games (with rounds)."""
    from sumo_cli.compete.experiment import layout
    from sumo_cli.store import reports as store_reports

    with db.read() as s:
        games = {g["index"]: g for g in store_reports.run_games(s, run["id"], with_rounds=True)}
    out: dict[tuple[int, int, int], list[dict]] = {}
    for g in layout(run["config"]):
        if g["index"] in games:
            out.setdefault((g["a"], g["b"], g["episodes"]), []).append(games[g["index"]])
    return out


def _size(run: dict, n_games: int) -> str:
    c = run["config"]
    return (f"Run {run['id']} ({run['status']}): {len(c['agents'])} agents x {len(c['opponents'])} opponents x "
            f"{c['repeats']} games" + (f" x {len(c['episodes'])} settings" if len(c["episodes"]) > 1 else "")
            + f" ({n_games} stored) of {c['rounds']} rounds, {c['physics']} physics, seed {run['seed']}. "
            f"Win rate: the share of a round's bouts the agent won; intervals: 95%, bootstrapped over the games "
            f"({stats.BOOTSTRAP} resamples).")


def fig5(db, run: dict, out: Path) -> Section | None:  # noqa: ANN001
    c = run["config"]
    groups = grouped(db, run)
    if not groups:
        return None
    agents, opps = c["agents"], c["opponents"]
    sec = Section("fig5", f"Fig. 5: adaptation against learning opponents (run {run['id']})", FIG5_FINDING,
                  runs=[run["id"]], commands=[command(run)])
    sec.body.append(_size(run, sum(len(v) for v in groups.values())))
    curves, changes, rows = {}, {}, []
    edge = max(1, int(round(EDGE_FRACTION * c["rounds"])))
    for (i, j, _e), games in sorted(groups.items()):
        w = per_round(games)
        m, lo, hi = stats.bootstrap_mean(w, seed=run["seed"] + 31 * i + j)
        met = sorted({r["version_b"] for g in games for r in g["rounds"]})
        curves[(i, j)] = (m, lo, hi, met)
        d = w[:, -edge:].mean(axis=1) - w[:, :edge].mean(axis=1)
        dm, dlo, dhi = stats.bootstrap_mean(d[:, None], seed=run["seed"] + 7)
        changes[(i, j)] = (d, float(dm[0]), float(dlo[0]), float(dhi[0]))
        rows.append([agents[i]["label"], agents[i]["strategy"], opps[j]["label"].split("@")[0],
                     f"{met[0]}..{met[-1]} ({len(met)} versions)", str(len(games)),
                     f"{w[:, :edge].mean():.2f}", f"{w[:, -edge:].mean():.2f}",
                     f"{dm[0]:+.2f} ({dlo[0]:+.2f}, {dhi[0]:+.2f})"])
    file = f"adaptation-{run['id']}.png"
    F.adaptation_curves(curves, agents, opps, out / file, f"run {run['id']}: win rate per round against learning "
                                                          f"opponents (bouts per round: {c['episodes'][0]})")
    sec.figures.append(Figure(file, "Share of bouts won in each round (no smoothing), one panel per learning opponent "
                                    "(its versions met in the title), one line per agent coloured by strategy; "
                                    "shaded: bootstrapped 95% interval over the games."))
    sec.body += ["", *md_table(["agent", "strategy", "opponent", "opponent versions", "games",
                                f"first {edge} rounds", f"last {edge} rounds", "change (95%)"], rows)]
    for label, pick in (("meta-learned adaptation improves its win rate over the game", lambda a: a["strategy"] == "meta"),
                        ("the baselines' win rates deteriorate over the game", lambda a: a["strategy"] != "meta")):
        ds = [changes[k][0] for k in changes if pick(agents[k[0]])]
        if not ds:
            sec.verdicts.append(verdict(label, None, "no such agent in this run"))
            continue
        pooled = np.concatenate(ds)
        if len(pooled) < stats.MIN_GAMES:
            sec.verdicts.append(verdict(label, None, f"only {len(pooled)} games (a verdict needs {stats.MIN_GAMES})"))
            continue
        m, lo, hi = stats.bootstrap_mean(pooled[:, None], seed=run["seed"])
        s_ = stats.sign(float(m[0]), float(lo[0]), float(hi[0]))
        want = s_ if label.startswith("meta") else (None if s_ is None else not s_)
        sec.verdicts.append(verdict(label, want, f"last {edge} minus first {edge} rounds, pooled over {len(pooled)} "
                                                 f"games: {m[0]:+.2f} (95% {lo[0]:+.2f} to {hi[0]:+.2f})"))
    from sumo_cli.report.paired import add_paired  # the verdict first: adapted minus unadapted, game by game

    add_paired(sec, run, {g["index"]: g for gs in groups.values() for g in gs})
    return sec


def fig6(db, run: dict, out: Path) -> Section | None:  # noqa: ANN001
    c = run["config"]
    groups = grouped(db, run)
    if not groups:
        return None
    agents = c["agents"]
    last = min(LAST_ROUNDS, c["rounds"])
    sec = Section("fig6", f"Fig. 6: sample complexity (run {run['id']})", FIG6_FINDING, runs=[run["id"]],
                  commands=[command(run)])
    sec.body.append(_size(run, sum(len(v) for v in groups.values())) + f" Measured: the last {last} rounds.")
    points: dict[int, list[tuple[int, float, float, float, int]]] = {}
    per_game: dict[tuple[int, int], np.ndarray] = {}
    for i in range(len(agents)):
        for e in c["episodes"]:
            games = [g for (a, _b, ep), gs in groups.items() if a == i and ep == e for g in gs]
            if not games:
                continue
            w = per_round(games)[:, -last:].mean(axis=1)
            per_game[(i, e)] = w
            m, lo, hi = stats.bootstrap_mean(w[:, None], seed=run["seed"] + e)
            points.setdefault(i, []).append((e, float(m[0]), float(lo[0]), float(hi[0]), len(games)))
    file = f"sample-complexity-{run['id']}.png"
    F.sample_complexity(points, agents, out / file, f"run {run['id']}: win rate over the last {last} rounds")
    sec.figures.append(Figure(file, f"Share of bouts won over the last {last} rounds against the number of episodes per "
                                    "round, one line per agent coloured by strategy; bars: bootstrapped 95% interval."))
    rows = [[agents[i]["label"], agents[i]["strategy"], str(e), str(n), f"{m:.2f} ({lo:.2f}, {hi:.2f})"]
            for i, pts in points.items() for e, m, lo, hi, n in pts]
    sec.body += ["", *md_table(["agent", "strategy", "episodes per round", "games", f"win rate, last {last} (95%)"], rows)]
    few, many = min(c["episodes"]), max(c["episodes"])
    for label, strategy, want_up in (("tracking improves with more episodes per round", "track", True),
                                     ("the meta-learned strategy stays about the same", "meta", False)):
        idx = [i for i, a in enumerate(agents) if a["strategy"] == strategy and (i, few) in per_game and (i, many) in per_game]
        if not idx or few == many:
            sec.verdicts.append(verdict(label, None, f"no {strategy} agent played both {few} and {many} episodes a round"))
            continue
        hi_w = np.concatenate([per_game[(i, many)] for i in idx])
        lo_w = np.concatenate([per_game[(i, few)] for i in idx])
        if min(len(hi_w), len(lo_w)) < stats.MIN_GAMES:
            sec.verdicts.append(verdict(label, None, f"only {min(len(hi_w), len(lo_w))} games per setting (a verdict "
                                                     f"needs {stats.MIN_GAMES})"))
            continue
        a_m, a_lo, a_hi = stats.bootstrap_mean(hi_w[:, None], seed=1)
        b_m, b_lo, b_hi = stats.bootstrap_mean(lo_w[:, None], seed=2)
        d = float(a_m[0] - b_m[0])
        half = float(np.hypot(a_hi[0] - a_lo[0], b_hi[0] - b_lo[0]) / 2)
        s_ = stats.sign(d, d - half, d + half)
        ours = s_ if want_up else s_ is None
        sec.verdicts.append(verdict(label, ours, f"{many} minus {few} episodes a round: {d:+.2f} (95% about "
                                                 f"{d - half:+.2f} to {d + half:+.2f})"))
    return sec
