"""The report's Fig. 3: few-shot adaptation on the held-out leg pairs, from stored `sumo eval
locomotion` runs."""

from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np

from sumo_cli.report.section import Figure, Section, md_table, verdict

FINDING = ("By the 6th and 7th episode the meta-updated policies do much better than the others on every held-out "
           "leg pair, and tracking does not improve on no adaptation (paper, Sec. 5.2, Fig. 3).")
#: The episodes (1-based) over which "by the 6th and 7th episode" is measured.
LATE = (6, 7)


def command(run: dict) -> str:
    c = run["config"]
    return (f"sumo eval locomotion {' '.join(shlex.quote(a) for a in c['agents'])} --repeats {c['repeats']} "
            f"--seed {run['seed']}")


def _late(r: dict) -> tuple[float, float]:
    """Mean reward over the LATE episodes and its 95% half-width (episodes independent)."""
    idx = [k - 1 for k in LATE]
    m = float(np.mean([r["mean"][k] for k in idx]))
    h = float(np.sqrt(sum(r["ci95"][k] ** 2 for k in idx)) / len(idx))
    return m, h


def section(run: dict, out: Path) -> Section | None:
    results = (run.get("state") or {}).get("results") or []
    if not results:
        return None
    sec = Section("fig3", f"Fig. 3: nonstationary locomotion (evaluation run {run['id']})", FINDING, runs=[run["id"]],
                  commands=[command(run)])
    agents = list(dict.fromkeys(f"{r['agent']} ({r['strategy']})" for r in results))
    sec.body.append(f"Run {run['id']}: {len(agents)} agents x {len(set(r['pair'] for r in results))} held-out pairs x 7 "
                    f"episodes, {run['config']['repeats']} repeats each, seed {run['seed']}. Intervals: 95%, "
                    "1.96 standard errors over the repeats.")
    file = f"locomotion-{run['id']}.png"
    from sumo_cli.report.plots import locomotion_adaptation

    locomotion_adaptation(results, out / file)
    sec.figures.append(Figure(file, "Mean episodic reward of each of the 7 consecutive episodes (the pair's torque "
                                    "falls from 1 to 0), shaded: 95% interval."))
    rows = []
    for r in results:
        m, h = _late(r)
        rows.append([r["agent"], r["strategy"], r["pair"], f"{r['mean'][0]:.1f} ± {r['ci95'][0]:.1f}", f"{m:.1f} ± {h:.1f}"])
    sec.body += ["", *md_table(["agent", "strategy", "pair", "episode 1", "episodes 6-7"], rows)]
    metas = [r for r in results if r["strategy"] == "meta"]
    claim = "meta-updated policies are best by episodes 6-7"
    if not metas or len(metas) == len(results):
        sec.verdicts.append(verdict(claim, None, "the run has no meta-learner, or nothing to compare it with"))
    else:
        wins, losses, notes = 0, 0, []
        pairs = sorted({r["pair"] for r in metas})
        for pair in pairs:
            m = max((_late(r) for r in metas if r["pair"] == pair), key=lambda t: t[0])
            o = max((_late(r) for r in results if r["pair"] == pair and r["strategy"] != "meta"), key=lambda t: t[0])
            d, h = m[0] - o[0], float(np.hypot(m[1], o[1]))
            wins += d > h
            losses += d < -h
            notes.append(f"{pair} {d:+.1f} ± {h:.1f}")
        ours = True if wins == len(pairs) else False if losses else None
        sec.verdicts.append(verdict(claim, ours, "best meta minus best other, episodes 6-7 (95%): " + ", ".join(notes)))
    tracks = [r for r in results if r["strategy"] == "track"]
    nones = [r for r in results if r["strategy"] == "none"]
    notes, better = [], 0
    for r in tracks:
        # the same policy played without adaptation (NAME:none), else an agent of the same architecture
        same = [b for b in nones if b["pair"] == r["pair"] and b["agent"] == r["agent"]]
        alike = [b for b in nones if b["pair"] == r["pair"] and b.get("arch") == r.get("arch")]
        base = (same or alike or [None])[0]
        if base is None:
            continue
        d = float(np.mean(np.array(r["mean"][1:]) - np.array(base["mean"][1:])))
        h = float(np.sqrt(np.sum(np.array(r["ci95"][1:]) ** 2 + np.array(base["ci95"][1:]) ** 2)) / 6)
        better += d > h
        notes.append(f"{r['pair']} {d:+.1f} ± {h:.1f}")
    claim = "tracking does not improve on no adaptation"
    if not notes:
        sec.verdicts.append(verdict(claim, None, "no agent of the architecture of a tracking agent was evaluated "
                                                 "without adaptation (add NAME:none)"))
    else:
        sec.verdicts.append(verdict(claim, better == 0, "tracking minus none over episodes 2-7: " + ", ".join(notes)))
    return sec
