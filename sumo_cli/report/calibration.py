"""The report's calibration table: cross-body win rates without adaptation, whether the paper's
densities balance the bodies here, and the densities that would bring the win rates near 50%.

The proposal. A body's strength is its Bradley-Terry log-odds over all cross-body bouts. Making a
body denser (heavier) raises its log-odds by about ``kappa`` per unit of log density ratio; the
paper's own calibration (its Table 4: densities (10, 10, 10) -> (13, 10, 39) moved the three win
rates from 25/84/90% to about 51%) gives ``kappa`` by least squares over its three pairs
(:func:`paper_kappa`). As the paper did, only the weaker bodies get heavier: body b's densities are
multiplied by ``exp((s_max - s_b) / kappa)``. It is one step of the paper's loop: rerun the
calibration at the proposed densities and repeat until the win rates are near 50%.
"""

from __future__ import annotations

import numpy as np

from sumo_cli.compete import ratings as R
from sumo_cli.report import figures as F
from sumo_cli.report import stats
from sumo_cli.report.adaptation import command
from sumo_cli.report.section import Figure, Section, md_table, verdict

FINDING = ("Bodies trained alike are unbalanced at equal densities (10, 10, 10); the densities (13, 10, 39) for "
           "(Ant, Bug, Spider) bring every cross-body win rate to about 51% (paper, Appendix, Table 4).")
BODY_ORDER = ("ant", "bug", "spider")
#: The paper's Table 4: densities (ant, bug, spider) -> the first body's win rate in each pair.
PAPER_TABLE = {
    (10.0, 10.0, 10.0): {("ant", "bug"): 0.252, ("ant", "spider"): 0.836, ("bug", "spider"): 0.902},
    (13.0, 10.0, 39.0): {("ant", "bug"): 0.506, ("ant", "spider"): 0.516, ("bug", "spider"): 0.517},
}


def _logit(p: float) -> float:
    return float(np.log(p / (1 - p)))


def paper_kappa() -> float:
    """Log-odds per unit log density ratio, fitted (least squares through 0) to the change between
    the paper's two calibration rows."""
    (before, rb), (after, ra) = PAPER_TABLE.items()
    xs, ys = [], []
    for (x, y), p in rb.items():
        i, j = BODY_ORDER.index(x), BODY_ORDER.index(y)
        xs.append(np.log(after[i] / before[i]) - np.log(after[j] / before[j]))
        ys.append(_logit(ra[(x, y)]) - _logit(p))
    xs, ys = np.array(xs), np.array(ys)
    return float(xs @ ys / (xs @ xs))


def section(db, run: dict, out) -> Section | None:  # noqa: ANN001
    from sumo_cli.report.adaptation import grouped
    from sumo_cli.sim.bodies import body_spec

    c = run["config"]
    groups = grouped(db, run)
    if not groups:
        return None
    agents = c["agents"]
    by_pair: dict[tuple[str, str], list[float]] = {}
    wins = np.zeros((3, 3))
    for (i, j, _e), games in groups.items():
        bi, bj = agents[i]["body"], agents[j]["body"]
        first, flip = (bi, bj), False
        if BODY_ORDER.index(bi) > BODY_ORDER.index(bj):
            first, flip = (bj, bi), True
        for g in games:
            n = g["bouts_won_a"] + g["bouts_won_b"] + g["bouts_drawn"]
            share = (g["bouts_won_a"] + g["bouts_drawn"] / 2) / max(1, n)
            by_pair.setdefault(first, []).append(1 - share if flip else share)
            ia, ib = BODY_ORDER.index(bi), BODY_ORDER.index(bj)
            wins[ia, ib] += g["bouts_won_a"] + g["bouts_drawn"] / 2
            wins[ib, ia] += g["bouts_won_b"] + g["bouts_drawn"] / 2
    rows = []
    for pair in sorted(by_pair, key=lambda p: (BODY_ORDER.index(p[0]), BODY_ORDER.index(p[1]))):
        x = np.array(by_pair[pair])
        m, lo, hi = stats.bootstrap_mean(x[:, None], seed=run["seed"])
        rows.append({"first": pair[0], "second": pair[1], "rate": float(m[0]), "low": float(lo[0]),
                     "high": float(hi[0]), "games": len(x)})
    sec = Section("calibration", f"Calibration of the bodies (run {run['id']})", FINDING, runs=[run["id"]],
                  commands=[command(run)])
    specs = {b: body_spec(b) for b in BODY_ORDER}
    dens = ", ".join(f"{b} {specs[b].torso_density:g}/{specs[b].leg_density:g}" for b in BODY_ORDER)
    sec.body.append(f"Run {run['id']} ({run['status']}): {', '.join(a['label'] for a in agents)} without adaptation, "
                    f"{c['repeats']} games per pair of {c['rounds']} rounds x {c['episodes'][0]} bouts "
                    f"({c['physics']} physics), seed {run['seed']}. Densities here (torso/legs): {dens}. Intervals: 95%, "
                    f"bootstrapped over the games. The paper's agents were trained alike (LSTM, self-play, the same "
                    f"iterations); check that these were before reading the table as a property of the bodies.")
    file = f"calibration-{run['id']}.png"
    F.calibration_bars(rows, out / file, f"run {run['id']}: cross-body win rates without adaptation")
    sec.figures.append(Figure(file, "The first body's share of bouts won against the second (draws half), with its "
                                    "95% interval; the dotted line is a balanced 50%."))
    paper = PAPER_TABLE[(13.0, 10.0, 39.0)]
    sec.body += ["", *md_table(["pair", "games", "first body's win rate (95%)", "paper, calibrated"],
                               [[f"{r['first']} vs {r['second']}", str(r["games"]),
                                 f"{r['rate']:.1%} ({r['low']:.1%}, {r['high']:.1%})",
                                 f"{paper[(r['first'], r['second'])]:.1%}"] for r in rows])]
    cols = [("ant", "bug"), ("ant", "spider"), ("bug", "spider")]
    ours = {(r["first"], r["second"]): r for r in rows}
    here = tuple(specs[b].torso_density for b in BODY_ORDER)
    table = [[f"paper, {'initial' if k == 0 else 'calibrated'} {tuple(int(x) for x in d)}",
              *(f"{t[c]:.1%}" for c in cols)] for k, (d, t) in enumerate(PAPER_TABLE.items())]
    table.append([f"here, run {run['id']} {tuple(int(x) for x in here)}",
                  *(f"{ours[c]['rate']:.1%} ± {(ours[c]['high'] - ours[c]['low']) / 2:.1%}" if c in ours else "-"
                    for c in cols)])
    sec.body += ["", "As the paper's Table 4 (win rate of the first body; torso densities Ant, Bug, Spider):", "",
                 *md_table(["densities", "Ant vs Bug", "Ant vs Spider", "Bug vs Spider"], table)]
    balanced = [r["low"] <= 0.5 <= r["high"] for r in rows]
    fewest = min(r["games"] for r in rows)
    sec.verdicts.append(verdict("the paper's densities balance the bodies here",
                                all(balanced) if fewest >= stats.MIN_GAMES else None,
                                (f"only {fewest} games for a pair (a verdict needs {stats.MIN_GAMES}): " if
                                 fewest < stats.MIN_GAMES else "") +
                                "; ".join(f"{r['first']} vs {r['second']} {r['rate']:.0%} ({r['low']:.0%}-{r['high']:.0%})"
                                          for r in rows)))
    present = [b for b in BODY_ORDER if wins[BODY_ORDER.index(b)].sum() + wins[:, BODY_ORDER.index(b)].sum() > 0]
    idx = [BODY_ORDER.index(b) for b in present]
    strength = R.bradley_terry_wins(wins[np.ix_(idx, idx)])
    kappa = paper_kappa()
    top = strength.max()
    proposal = []
    for b, s_b in zip(present, strength):
        f = float(np.exp((top - s_b) / kappa))
        proposal.append([b, f"{s_b:+.2f}", f"x{f:.2f}", f"{specs[b].torso_density * f:.1f}/{specs[b].leg_density * f:.1f}"])
    sec.body += ["", f"Proposed densities (one step; κ = {kappa:.2f} log-odds per unit log density ratio, fitted to the "
                     "paper's own calibration):", "",
                 *md_table(["body", "strength (log-odds)", "density factor", "proposed torso/legs"], proposal)]
    return sec
