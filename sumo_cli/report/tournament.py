"""The report's tournament parts: Fig. 7 (TrueSkill by category), the top-5 table with the a-priori
heatmap, and (beyond the paper) the empirical win-rate matrix ranked by Nash averaging beside
TrueSkill and Bradley-Terry."""

from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np

from sumo_cli.compete import ratings as R
from sumo_cli.report import figures as F
from sumo_cli.report import gametheory as G
from sumo_cli.report.section import Figure, Section, md_table, verdict

#: Bootstrap resamples (games drawn with replacement) behind the 95% intervals of Nash averaging.
NASH_BOOTSTRAP = 40
#: Agents per architecture in the top table (the paper: top 5 of MLP and of LSTM).
TOP = 5
#: Kendall's tau between TrueSkill's and Nash averaging's orders from which they count as alike.
TAU_ALIKE = 0.8
#: Agents in the a-priori heatmap.
HEATMAP_TOP = 10

FIG7_FINDING = ("Agents that meta-learned to adapt have the highest TrueSkill in every body and policy category, "
                "and recurrent (LSTM) policies dominate MLPs (paper, Sec. 5.3, Fig. 7).")
TOP5_FINDING = ("Within the LSTM and the MLP agents, the best meta-learner is 10 to 25% more likely to beat the best "
                "agent of any other adaptation strategy (paper, Tab. 1 and its heatmap).")
NASH_FINDING = ("TrueSkill gives each agent one number, which assumes skill is transitive; "
                "RoboSumo's bodies can beat each other in a circle. Nash averaging (Balduzzi et al., 2018) ranks "
                "agents by their payoff against the maximum-entropy Nash mixture of the win-rate matrix instead.")


def command(run: dict) -> str:
    """The command that reproduces a stored tournament run exactly."""
    c, g = run["config"], run["config"].get("game", {})
    names = ",".join(m["name"] for m in c["members"])
    out = (f"sumo tournament --agents {shlex.quote(names)} --matches {c['matches']} --rounds {g.get('rounds')} "
           f"--episodes {g.get('episodes')} --physics {g.get('physics')} --seed {run['seed']}")
    default = R.equal_agents_draw_probability(g.get("rounds", 100), g.get("episodes", 3))
    if c.get("draw_probability") is not None and abs(c["draw_probability"] - default) > 1e-12:
        out += f" --draw-probability {c['draw_probability']}"
    return out


def _combo(r: dict) -> str:
    return f"{r['arch']}-{r['strategy']}"


def _fig7_verdicts(rows: list[dict]) -> list:
    out = []
    cats = {}
    for r in rows:
        cats.setdefault((r["body"], r["arch"]), []).append(r)
    checked, lost = [], []
    for (body, arch), group in sorted(cats.items()):
        meta = [r for r in group if r["strategy"] == "meta"]
        other = [r for r in group if r["strategy"] != "meta"]
        if meta and other:
            bm, bo = max(meta, key=lambda r: r["mu"]), max(other, key=lambda r: r["mu"])
            checked.append(f"{body}/{arch}")
            if bm["mu"] <= bo["mu"]:
                lost.append(f"{body}/{arch} ({bo['agent']} {bo['mu']:.1f} vs {bm['agent']} {bm['mu']:.1f})")
    claim = "meta-learners top every body x policy category"
    if not checked:
        out.append(verdict(claim, None, "the tournament has no category with both a meta-learning agent and another "
                                        "agent to compare it with"))
    else:
        out.append(verdict(claim, not lost, f"the best meta-learner has the highest μ in {len(checked) - len(lost)} of "
                                            f"{len(checked)} categories" + (f"; not in {', '.join(lost)}" if lost else "")))
    lstm = np.array([r["mu"] for r in rows if r["arch"] == "lstm"])
    mlp = np.array([r["mu"] for r in rows if r["arch"] == "mlp"])
    claim = "LSTM policies rate higher than MLPs"
    if len(lstm) < 2 or len(mlp) < 2:
        out.append(verdict(claim, None, f"{len(lstm)} LSTM and {len(mlp)} MLP agents: too few to compare"))
    else:
        diff = lstm.mean() - mlp.mean()
        half = F.Z95 * np.sqrt(lstm.var(ddof=1) / len(lstm) + mlp.var(ddof=1) / len(mlp))
        ours = None if abs(diff) <= half else diff > 0
        out.append(verdict(claim, ours, f"mean μ of {len(lstm)} LSTM minus {len(mlp)} MLP agents is {diff:+.2f} "
                                        f"(95% interval {diff - half:+.2f} to {diff + half:+.2f})"))
    return out


def _top5(rows: list[dict]) -> tuple[list[str], list]:
    lines, claims = [], []
    for arch in ("lstm", "mlp"):
        group = [r for r in rows if r["arch"] == arch]  # rows come ranked by mu - 3 sigma
        if not group:
            continue
        lines += ["", f"Top {min(TOP, len(group))} {arch.upper()} agents by the conservative rating μ − 3σ:", ""]
        lines += md_table(["rank", "agent", "body", "combination", "μ − 3σ", "μ (95%)", "games", "W/D/L"],
                          [[str(k + 1), r["agent"], r["body"], _combo(r), f"{r['conservative']:.2f}",
                            f"{r['mu']:.2f} ± {F.Z95 * r['sigma']:.2f}", str(r["games"]),
                            f"{r['wins']}/{r['draws']}/{r['losses']}"] for k, r in enumerate(group[:TOP])])
        meta = [r for r in group if r["strategy"] == "meta"]
        other = [r for r in group if r["strategy"] != "meta"]
        claim = f"the best {arch.upper()} meta-learner is favoured over the best other {arch.upper()} agent"
        if not meta or not other:
            claims.append(verdict(claim, None, f"no {arch.upper()} " + ("meta-learner" if not meta else "non-meta agent")
                                               + " in this tournament"))
        else:
            bm, bo = meta[0], other[0]
            p = R.win_probability(R.Rating(bm["mu"], bm["sigma"]), R.Rating(bo["mu"], bo["sigma"]))
            claims.append(verdict(claim, p > 0.5, f"a-priori P({bm['agent']} beats {bo['agent']}) = {p:.2f}"))
    return lines, claims


def _nash(db, run: dict, rows: list[dict], out: Path, stem: str) -> tuple[list[str], list[Figure], dict]:  # noqa: ANN001
    from sumo_cli.store import reports as store_reports

    from sumo_cli.compete.schedule import random_pairs

    members = [m["name"] for m in run["config"]["members"]]
    with db.read() as s:
        games = store_reports.run_games(s, run["id"])
    # the players by their places in the run's schedule: a version may be shipped under another name
    # since (a retired population member), and a member played with another strategy names it too
    schedule = random_pairs(len(members), run["config"]["matches"], run["seed"])
    tuples = [(schedule[g["index"]].a, schedule[g["index"]].b, g["bouts_won_a"], g["bouts_won_b"], g["bouts_drawn"])
              for g in games]
    n = len(members)
    wins, bouts = G.bout_counts(n, tuples)
    p, observed = G.win_rate_matrix(wins, bouts)
    nash = G.nash_averaging(p)
    rng = np.random.default_rng(run["seed"])
    boot = []
    for _ in range(NASH_BOOTSTRAP if len(tuples) > 1 else 0):
        pick = rng.integers(0, len(tuples), len(tuples))
        bw, bb = G.bout_counts(n, [tuples[k] for k in pick])
        boot.append(G.nash_averaging(G.win_rate_matrix(bw, bb)[0])["skill"])
    lo, hi = (np.percentile(boot, 2.5, axis=0), np.percentile(boot, 97.5, axis=0)) if boot else (nash["skill"],) * 2
    by_name = {r["agent"]: r for r in rows}
    mu = np.array([by_name[m]["mu"] for m in members])
    bt = np.array([by_name[m].get("bradley_terry", {}).get("strength", 0.0) for m in members])
    rk = {"TrueSkill μ": G.ranks(mu), "Bradley-Terry": G.ranks(bt), "Nash averaging": G.ranks(nash["skill"])}
    order = np.lexsort((-mu, -nash["skill"]))
    if n > F.MATRIX_NAMED:  # too many to name: grouped by body and combination, best first within
        combos = list(F.COMBINATION_COLOURS)
        key = [(list(F.BODY_COLOURS).index(by_name[m]["body"]) if by_name[m]["body"] in F.BODY_COLOURS else 9,
                combos.index(_combo(by_name[m])) if _combo(by_name[m]) in combos else 99) for m in members]
        order = np.array(sorted(range(n), key=lambda i: (*key[i], -nash["skill"][i])))
    names = [members[i] for i in order]
    figs = []
    matrix_file = f"{stem}-win-rates.png"
    F.win_rate_matrix(p[np.ix_(order, order)], observed[np.ix_(order, order)], names, out / matrix_file,
                      [f"{by_name[m]['body']} {_combo(by_name[m])}" for m in names],
                      f"tournament run {run['id']}: P(row beats column) over {int(bouts.sum() / 2)} bouts")
    figs.append(Figure(matrix_file, f"Empirical share of bouts won by the row agent (draws count half; "
                                    f"{G.PRIOR_BOUTS:g} virtual bouts per pair), agents in "
                                    + ("Nash-averaging order" if n <= F.MATRIX_NAMED else "groups of body and combination")
                                    + "; hatched (pale) cells: pairs that never met, filled by Bradley-Terry."))
    rank_file = f"{stem}-ranks.png"
    F.rank_comparison(members, [by_name[m]["body"] for m in members], rk, out / rank_file,
                      f"tournament run {run['id']}: rank of each agent under three ratings")
    figs.append(Figure(rank_file, "Each agent's rank under TrueSkill, Bradley-Terry and Nash averaging; "
                                  "crossing lines are disagreements."))
    pairs = n * (n - 1) // 2
    met = int(observed.sum() // 2)
    lines = [f"{len(games)} games, {int(bouts.sum() / 2)} bouts; {met} of {pairs} pairs met "
             f"({pairs - met} filled in by Bradley-Terry). Nash averaging's intervals: {len(boot)} bootstrap "
             "resamples of the games.", ""]
    table = []
    for i in order:
        r = by_name[members[i]]
        b = r.get("bradley_terry")
        table.append([members[i], f"{r['mu']:.2f} ± {F.Z95 * r['sigma']:.2f}",
                      f"{b['strength']:+.2f} ({b['low']:+.2f}, {b['high']:+.2f})" if b else "-",
                      f"{nash['weights'][i]:.2f}", f"{nash['skill'][i]:+.2f} ({lo[i]:+.2f}, {hi[i]:+.2f})",
                      f"{rk['TrueSkill μ'][i]} / {rk['Bradley-Terry'][i]} / {rk['Nash averaging'][i]}"])
    lines += md_table(["agent", "TrueSkill μ (95%)", "Bradley-Terry (95%)", "Nash weight",
                       "Nash averaging skill (95%)", "rank TS / BT / Nash"], table)
    tau_ts = G.kendall_tau(mu, nash["skill"])
    tau_bt = G.kendall_tau(bt, nash["skill"])
    tau_tb = G.kendall_tau(mu, bt)
    lines += ["", f"Kendall's τ between the rankings: TrueSkill–Nash {tau_ts:.2f}, Bradley-Terry–Nash {tau_bt:.2f}, "
                  f"TrueSkill–Bradley-Terry {tau_tb:.2f} (1 = the same order)."]
    shift = np.abs(rk["TrueSkill μ"] - rk["Nash averaging"])
    moved = [i for i in np.argsort(-shift, kind="stable") if shift[i] >= max(2, n // 10)][:5]
    if moved:
        lines.append("Where TrueSkill and Nash averaging disagree most: " + "; ".join(
            f"{members[i]} is {rk['TrueSkill μ'][i]} by TrueSkill, {rk['Nash averaging'][i]} by Nash averaging"
            for i in moved) + ".")
    else:
        lines.append("TrueSkill and Nash averaging order the agents alike (no agent moves by two ranks or more).")
    support = [members[i] for i in np.argsort(-nash["weights"]) if nash["weights"][i] > 1e-3]
    lines.append(f"The Nash mixture's support ({len(support)} of {n} agents): {', '.join(support)}.")
    cycles = G.nontransitive_cycles(p, observed, members, wins=wins, bouts=bouts)
    lines.append("Circles among pairs that met, each beating the next by more than a fair coin's 95% noise: "
                 + ("; ".join(cycles) if cycles else "none") + ".")
    stats = {"tau_trueskill_nash": tau_ts, "moved": len(moved), "cycles": len(cycles), "support": len(support)}
    return lines, figs, stats


def sections(db, run: dict, out: Path) -> list[Section]:  # noqa: ANN001
    """Fig. 7, the top-5 table and the Nash-averaging part for one stored tournament run with at
    least one rated game; figures written to ``out``."""
    from sumo_cli.compete.results import tournament_results
    from sumo_cli.report.plots import win_probability_heatmap

    res = tournament_results(db, run["id"])
    rows = res["leaderboard"]
    g = run["config"].get("game", {})
    stem = f"tournament-{run['id']}"
    size = (f"Run {run['id']} ({run['status']}): {len(rows)} agents, {res['rated']} of {res['total']} games rated, "
            f"each {g.get('rounds')} rounds x {g.get('episodes')} bouts ({g.get('physics')} physics), seed {run['seed']}; "
            f"TrueSkill draw probability {res['draw_probability']:.3f}. Intervals: μ ± 1.96σ.")
    cmd = [command(run)]
    fig7 = Section("fig7", f"Fig. 7: TrueSkill by category (tournament run {run['id']})", FIG7_FINDING,
                   verdicts=_fig7_verdicts(rows), body=[size], runs=[run["id"]], commands=cmd)
    F.trueskill_by_category(rows, out / f"{stem}-trueskill.png", f"tournament run {run['id']}: TrueSkill by body and "
                                                                  f"combination ({res['rated']} games)")
    fig7.figures.append(Figure(f"{stem}-trueskill.png", "Every agent's TrueSkill μ with its 95% interval, one panel "
                                                        "per body, coloured by policy/adaptation combination; "
                                                        "the filled dot is the best of its combination."))
    cats = []
    for key in ("body", "arch", "strategy"):
        for grp in res["categories"][key]:
            cats.append([key, grp[key], str(grp["agents"]), f"{grp['mean_mu']:.2f}", f"{grp['sd_mu']:.2f}",
                         f"{grp['win_rate']:.2f}"])
    fig7.body += ["", *md_table(["by", "group", "agents", "mean μ", "sd of μ", "share of games won"], cats)]
    lines, claims = _top5(rows)
    top5 = Section("top5", f"Top-5 table and a-priori win rates (tournament run {run['id']})", TOP5_FINDING,
                   verdicts=claims, body=[size, *lines], runs=[run["id"]], commands=cmd)
    win_probability_heatmap(rows, out / f"{stem}-apriori.png", HEATMAP_TOP)
    top5.figures.append(Figure(f"{stem}-apriori.png", f"A-priori P(row beats column) of the top {min(HEATMAP_TOP, len(rows))} "
                                                      "agents from their TrueSkill (the paper's equation)."))
    nash = Section("nash", f"Beyond the paper: win-rate matrix and Nash averaging (tournament run {run['id']})",
                   NASH_FINDING, runs=[run["id"]], commands=cmd, beyond=True)
    lines, figs, stats = _nash(db, run, rows, out, stem)
    nash.body, nash.figures = lines, figs
    tau = stats["tau_trueskill_nash"]
    holds = False if stats["cycles"] else True if tau >= TAU_ALIKE else None
    nash.verdicts.append(verdict(
        "one number per agent (TrueSkill's assumption) describes this tournament", holds,
        f"{stats['cycles']} well-measured circles; {stats['moved']} agents move by two ranks or more between "
        f"TrueSkill and Nash averaging (Kendall's τ = {tau:.2f}; alike from {TAU_ALIKE})"))
    return [fig7, top5, nash]
