"""How the population fights, for :mod:`benchmarks.population_quality`: how each cell's bouts end and
how long they last, the original RoboSumo agents as opponents, the candidates measured in a slot's
place, the issue's bars, the Markdown page and the manifest's ``quality``.

The original agents (``zoo-<body>-<arch>-v3``, as ``sumo zoo import`` names them) are only measured
against: they come from the database when it holds them, else straight from the zoo folder's files
(nothing is written), and never enter a training run.
"""

from __future__ import annotations

import json
import math
import os
import statistics
from pathlib import Path

#: Share of bouts won, at least: the bars of the issue (a population that fights).
BARS = {"motionless-ant": 0.85, "motionless-bug": 0.85, "random": 0.90, "stage-1": 0.65}
#: The no-adaptation Ant and Bug agents against the original MLP v3 of their body, at least.
ZOO_MLP_BAR = 0.30
ZOO_MLP_BAR_SLOTS = ("ant-mlp", "ant-lstm", "bug-mlp", "bug-lstm")
#: Bouts against a motionless body that end by timeout, at most (a timeout share says "stands off").
TIMEOUT_BAR = 0.10
ZOO_ARCHS = ("mlp", "lstm")
ENDS = ("won_ring_out", "won_fall", "lost_ring_out", "lost_fall", "timeout", "unstable", "drawn_other")


class BadInput(Exception):
    """One sentence for the user; the benchmark exits 2 before it writes anything."""


def summarize(episodes) -> dict:  # noqa: ANN001 - compete.game.EpisodeResult
    """A cell's bouts: won, drawn, lost, how they ended and how long they lasted (env steps)."""
    eps = list(episodes)
    ends = dict.fromkeys(ENDS, 0)
    for e in eps:
        if e.outcome in ("win", "loss") and e.reason in ("ring_out", "fall"):
            ends[f"{'won' if e.outcome == 'win' else 'lost'}_{e.reason}"] += 1
        elif e.reason in ("timeout", "unstable"):
            ends[e.reason] += 1
        else:
            ends["drawn_other"] += 1
    lengths = [e.length for e in eps]
    return {"won": sum(e.outcome == "win" for e in eps), "drawn": sum(e.outcome == "draw" for e in eps),
            "lost": sum(e.outcome == "loss" for e in eps), "bouts": len(eps), "ends": ends,
            "length": {"mean": round(statistics.fmean(lengths), 1) if lengths else None,
                       "median": statistics.median(lengths) if lengths else None}}


def zoo_folder(given: str | None, repo_root: Path) -> Path | None:
    """The folder of the original agents: ``--zoo`` when given (empty: none), else SUMO_ZOO_DIR, else
    ``../shared/robosumo-zoo`` beside the checkout when it is there."""
    if given is not None:
        if not given.strip():
            return None
        p = Path(given).expanduser()
        if not p.is_dir():
            raise BadInput(f"--zoo {given}: no such folder of the original RoboSumo agents")
        return p
    env = os.environ.get("SUMO_ZOO_DIR")
    if env:
        p = Path(env).expanduser()
        if not p.is_dir():
            raise BadInput(f"SUMO_ZOO_DIR={env} is not a folder")
        return p
    p = repo_root.parent / "shared" / "robosumo-zoo"
    return p if p.is_dir() else None


def zoo_opponents(db, body: str, folder: Path | None, load_agent) -> dict:  # noqa: ANN001
    """``{"zoo-<body>-<arch>-v3": AgentData}`` for the body's original MLP v3 and LSTM v3: the
    database's imported ones (``load_agent(db, name)``: the agent library's), else the zoo folder's
    files; empty when neither has them."""
    from sumo_cli.compete.game import AgentData
    from sumo_cli.store import registry

    out = {}
    files = {}
    if folder is not None:
        from sumo_cli.nets.zoo import find_zoo_files

        files = {(b, a, k): f for b, a, k, f in find_zoo_files(folder)}
    for arch in ZOO_ARCHS:
        name = f"zoo-{body}-{arch}-v3"
        with db.read() as s:
            held = registry.get_agent(s, name) is not None
        if held:
            out[name] = AgentData.from_loaded(load_agent(db, name))
        elif (body, arch, 3) in files:
            from sumo_cli.nets.zoo import load_zoo_file

            spec, params, obs_stats, _ = load_zoo_file(files[(body, arch, 3)], body, arch)
            out[name] = AgentData(name, 1, body, "none", spec.to_dict(), {k: v.numpy() for k, v in params.items()},
                                  {k: v.numpy() for k, v in obs_stats.items()})
    return out


def parse_candidates(values: list[str]) -> list[tuple[str, int | None]]:
    """``--agent NAME[@VERSION]`` (repeatable, or comma-separated) as (name, version or None)."""
    out = []
    for value in values:
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            name, _, version = part.partition("@")
            if not name or (version and not version.isdigit()):
                raise BadInput(f"--agent {part}: give an agent as NAME or NAME@VERSION (a version number)")
            out.append((name, int(version) if version else None))
    return out


def resolve_candidates(s, wanted: list[tuple[str, int | None]]) -> dict:  # noqa: ANN001 - a read session
    """``{"NAME@VERSION": (agent name, slot, [its five stages up to VERSION], sha256 of VERSION)}``;
    the slot is the canonical combination of its body, architecture and strategy."""
    from sumo_cli import names
    from sumo_cli.compete.population import stage_versions
    from sumo_cli.store import registry

    out = {}
    for name, version in wanted:
        agent = registry.get_agent(s, name)
        if agent is None or not agent.versions:
            raise BadInput(f"--agent {name}: the database has no agent of that name with versions")
        have = sorted(v.version for v in agent.versions)
        version = version if version is not None else (agent.default_version or have[-1])
        if version not in have:
            raise BadInput(f"--agent {name}@{version}: no such version (it has {have[0]} to {have[-1]})")
        if agent.body not in names.BODIES:
            raise BadInput(f"--agent {name}: a {agent.body} agent has no place in the population")
        slot = names.canonical_name(agent.body, agent.arch, agent.strategy)
        sha = next(v.sha256 for v in agent.versions if v.version == version)
        out[f"{name}@{version}"] = (name, slot, stage_versions([v for v in have if v <= version]), sha)
    return out


def _wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (math.nan, math.nan)
    z, p = 1.96, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def _share(k: int, n: int, bar: float | None, at_most: bool = False) -> dict:
    rate = k / n
    out = {"won" if not at_most else "timeouts": k, "bouts": n, "rate": round(rate, 4),
           "ci95": [round(x, 4) for x in _wilson(k, n)]}
    if bar is not None:
        out.update(bar=bar, met=(rate <= bar) if at_most else (rate >= bar))
        if at_most:
            out["at_most"] = True
    return out


def bars(slot: str, games: dict) -> dict:
    """The bars a slot's games measure (``slot`` is its canonical name): share won vs motionless,
    random, its stage 1 and the original MLP v3 (Ant and Bug MLP and LSTM), the original LSTM v3
    (reported: no bar), and the share of bouts vs the motionless bodies that end by timeout."""
    from sumo_cli import names

    body = names.parse(slot).body
    out = {}
    for what, bar in BARS.items():
        if what in games:
            out[what] = _share(games[what]["won"], games[what]["bouts"], bar)
    for arch in ZOO_ARCHS:
        g = games.get(f"zoo-{body}-{arch}-v3")
        if g:
            bar = ZOO_MLP_BAR if arch == "mlp" and slot in ZOO_MLP_BAR_SLOTS else None
            out[f"original-{arch}-v3"] = _share(g["won"], g["bouts"], bar)
    still = [games[k] for k in ("motionless-ant", "motionless-bug") if k in games and "ends" in games[k]]
    if still:
        out["timeouts-vs-motionless"] = _share(sum(g["ends"]["timeout"] for g in still), sum(g["bouts"] for g in still),
                                               TIMEOUT_BAR, at_most=True)
    return out


def manifest_quality(manifest: Path) -> dict:
    """The results :func:`write_quality` recorded in a manifest, keyed by slot as ``--out`` holds them."""
    from sumo_cli import names

    slots = set(names.all_combination_names())
    return {e["name"]: {**e["provenance"]["quality"], "slot": e["name"]} for e in json.loads(manifest.read_text())["agents"]
            if e["name"] in slots and (e.get("provenance") or {}).get("quality")}


def write_quality(manifest: Path, out: dict, shas: dict) -> list[str]:
    """Each manifest entry whose default version is a measured final stage (the same SHA-256) gets
    its results as ``provenance.quality``; returns the entries written. Nothing else changes."""
    doc = json.loads(manifest.read_text())
    done = []
    for entry in doc["agents"]:
        final = next((v for v in entry["versions"] if v["version"] == entry.get("default_version")), None)
        key = next((k for k in out if final and shas.get(k) == final["sha256"] and out[k]["slot"] == entry["name"]), None)
        if key is None:
            continue
        entry.setdefault("provenance", {})["quality"] = {k: v for k, v in out[key].items() if k != "slot"}
        done.append(entry["name"])
    if done:
        manifest.write_text(json.dumps(doc, indent=2) + "\n")
    return done


def _pct(b: dict | None) -> str:
    if not b:
        return "-"
    k = b.get("won", b.get("timeouts"))
    text = f"{b['rate']:.1%} ({k}/{b['bouts']}; {b['ci95'][0]:.0%}-{b['ci95'][1]:.0%})"
    return text + (" **below**" if b.get("met") is False else "")


def markdown(out: dict, args) -> str:  # noqa: ANN001 - the parsed arguments
    """The page docs/population.md: bars, how bouts end, cross-body pairings, budget, meta gain."""
    from sumo_cli import names

    order = {n: i for i, n in enumerate(names.all_combination_names())}
    keys = sorted(out, key=lambda n: (order.get(out[n]["slot"], 99), n))
    zoo = f" --zoo {os.path.relpath(args.zoo_used, Path(__file__).resolve().parents[1])}" if args.zoo_used else ""
    lines = [
        "# The population's quality, measured as the agents play in games",
        "",
        f"Generated by `python -m benchmarks.population_quality --rounds {args.rounds} --cross-rounds {args.cross_rounds} "
        f"--seed {args.seed} --parts {args.parts}{zoo}` (faithful physics, standard start, fresh seeds; adaptive agents "
        "adapt between rounds of 3 bouts). Share of bouts won by each agent's final stage, with its 95% Wilson interval. "
        f"Bars: motionless Ant and Bug >= {BARS['motionless-ant']:.0%}, random actions >= {BARS['random']:.0%}, its own "
        f"stage 1 >= {BARS['stage-1']:.0%}, Ant and Bug MLP and LSTM vs their body's original MLP v3 >= {ZOO_MLP_BAR:.0%} "
        f"(the original LSTM v3: reported), bouts against a motionless body that end by timeout <= {TIMEOUT_BAR:.0%}. "
        "The original RoboSumo agents are only measured against" + ("." if args.zoo_used else
                                                                     "; no zoo folder was at hand, so their columns are empty."),
        "",
        "| agent (final stage) | stages | motionless Ant | motionless Bug | random | own stage 1 | original MLP v3 "
        "| original LSTM v3 | timeouts vs motionless | all bars |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    cols = ("motionless-ant", "motionless-bug", "random", "stage-1", "original-mlp-v3", "original-lstm-v3",
            "timeouts-vs-motionless")
    for k in keys:
        e = out[k]
        lines.append(f"| `{k}` ({e['agent']}) | {','.join(map(str, e['stage_versions']))} | "
                     + " | ".join(_pct(e["bars"].get(c)) for c in cols)
                     + f" | {'-' if e['all_bars_met'] is None else 'met' if e['all_bars_met'] else 'not met'} |")
    lines += ["", "How the bouts end and how long they last (env steps of at most 500; won and lost by push-out or fall, "
              "a timeout is a draw):", "",
              "| agent | opponent | bouts | won: push-out | won: fall | lost | timeout | length mean | length median |",
              "|---|---|---|---|---|---|---|---|---|"]
    for k in keys:
        for what, g in out[k]["games"].items():
            if "ends" not in g or what.endswith("unadapted"):
                continue
            n, ends = g["bouts"], g["ends"]
            lost = ends["lost_ring_out"] + ends["lost_fall"]
            lines.append(f"| `{k}` | {what} | {n} | {ends['won_ring_out'] / n:.0%} | {ends['won_fall'] / n:.0%} | "
                         f"{lost / n:.0%} | {ends['timeout'] / n:.0%} | {g['length']['mean']:.0f} | {g['length']['median']:.0f} |")
    lines += ["", "Against the pool's final no-adaptation agents of the other two bodies (reported; share of bouts won):", "",
              "| agent | " + " | ".join(["opponent"] * 4) + " |", "|---|---|---|---|---|"]
    for k in keys:
        games = out[k]["games"]
        cells = [f"{w}: {g['won'] / g['bouts']:.0%} of {g['bouts']}" for w, g in games.items()
                 if "@" in w and not w.endswith("unadapted")]
        if cells:
            lines.append(f"| `{k}` | " + " | ".join(cells) + " |")
    keys_with_budget = [k for k in keys if out[k].get("budget")]
    if keys_with_budget:
        lines += ["", "What each agent's training cost on the 2-core machine that trained the plan (the runs' own recorded "
                  "wall time, two steps side by side; a tracking agent plays its sibling's versions and costs nothing more):",
                  "", "| agent | iterations | env steps | wall hours |", "|---|---|---|---|"]
    total_steps = total_s = 0
    for k in keys_with_budget:
        b = out[k]["budget"]
        total_steps, total_s = total_steps + b["env_steps"], total_s + b["wall_seconds"]
        lines.append(f"| `{k}` | {b['iterations']} | {b['env_steps'] / 1e6:.2f} M | {b['wall_seconds'] / 3600:.2f} |")
    if keys_with_budget:
        lines.append(f"| **all measured** | | **{total_steps / 1e6:.1f} M** | **{total_s / 3600:.2f}** |")
    metas = [k for k in keys if "meta_gain_bouts_won" in out[k]]
    if metas:
        lines += ["", "Meta-learners: the meta-update's gain, adapted minus unadapted (95% intervals):", "",
                  "| agent | bouts won in games vs the cross-body pool (same seeds) | held-out return per bout in training (its measurements) |",
                  "|---|---|---|"]
        for k in metas:
            g, h = out[k]["meta_gain_bouts_won"], out[k].get("meta_gain_heldout_return")
            hs = "-" if not h else f"{h['mean']:+.1f} +- {h['ci95']:.1f} (n = {h['n']})"
            lines.append(f"| `{k}` | {g['mean']:+.1%} +- {g['ci95']:.1%} ({g['games']} games) | {hs} |")
    return "\n".join(lines) + "\n"
