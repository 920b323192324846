"""Everything the database holds, turned into report sections (figures written as it goes), and
the experiments it holds nothing of."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sumo_cli.report import evolution as EV
from sumo_cli.report import experiments as X
from sumo_cli.report import locomotion as LO
from sumo_cli.report import tournament as TO
from sumo_cli.report.section import Missing, Section

#: The order of the report's parts: the paper's figures in its order, then what goes beyond it.
ORDER = ("fig3", "fig5", "fig6", "fig7", "top5", "nash", "fig8", "calibration")


@dataclass
class Report:
    sections: list[Section]
    missing: list[Missing]
    database: str


def inventory(db) -> dict:  # noqa: ANN001
    """The stored runs the report reads, by kind, and the agent catalogue."""
    from sumo_cli.store import reports as store_reports

    with db.read() as s:
        return {"tournament": store_reports.runs_of_kind(s, "tournament"),
                "evolution": store_reports.runs_of_kind(s, "evolution"),
                "locomotion-eval": store_reports.runs_of_kind(s, "locomotion-eval"),
                **{kind: store_reports.runs_of_kind(s, kind) for kind in ("adaptation", "sample-complexity", "calibration")},
                "catalogue": store_reports.agent_catalogue(s)}


def present(inv: dict) -> set[str]:
    """The parts the stored runs can draw, without drawing them."""
    have = set()
    if any((r.get("state") or {}).get("results") for r in inv["locomotion-eval"]):
        have.add("fig3")
    if any(r["done"] >= 1 for r in inv["tournament"]):
        have |= {"fig7", "top5", "nash"}
    if any(r["done"] >= 1 for r in inv["evolution"]):
        have.add("fig8")
    for kind, key in (("adaptation", "fig5"), ("sample-complexity", "fig6"), ("calibration", "calibration")):
        if any(r["done"] >= 1 for r in inv[kind]):
            have.add(key)
    return have


def missing(db, workers: int | None = None) -> list[Missing]:  # noqa: ANN001
    inv = inventory(db)
    return X.missing(inv["catalogue"], present(inv), workers)


def build(db, out: Path, workers: int | None = None, say: Callable[[str], None] = lambda line: None) -> Report:  # noqa: ANN001
    """Read every stored experiment of ``db``; write its figures into ``out`` (which exists)."""
    inv = inventory(db)
    tournaments, evolutions, loco = inv["tournament"], inv["evolution"], inv["locomotion-eval"]
    catalogue = inv["catalogue"]
    sections: list[Section] = []
    for run in loco:
        sec = LO.section(run, out)
        if sec is not None:
            sections.append(sec)
            say(f"locomotion evaluation run {run['id']}: Fig. 3")
    for run in tournaments:
        if run["done"] < 1:
            continue
        sections += TO.sections(db, run, out)
        say(f"tournament run {run['id']}: Fig. 7, top-5 table, win-rate matrix and Nash averaging")
    for run in evolutions:
        sec = EV.section(db, run, out)
        if sec is not None:
            sections.append(sec)
            say(f"evolution run {run['id']}: Fig. 8")
    from sumo_cli.report import adaptation as AD
    from sumo_cli.report import calibration as CA

    for kind, draw, what in (("adaptation", AD.fig5, "Fig. 5"), ("sample-complexity", AD.fig6, "Fig. 6"),
                             ("calibration", CA.section, "the calibration table")):
        for run in inv[kind]:
            sec = draw(db, run, out) if run["done"] >= 1 else None
            if sec is not None:
                sections.append(sec)
                say(f"{kind} run {run['id']}: {what}")
    sections.sort(key=lambda sec: (ORDER.index(sec.key), sec.runs))
    have = {sec.key for sec in sections}
    return Report(sections, X.missing(catalogue, have, workers), db.display_url)
