"""`sumo report`: every experiment the database holds as one Markdown report with its figures;
the commands for what it does not hold, and with --run, running them."""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Optional

import typer

from sumo_cli.cli.common import (
    err_console, friendly, open_db, print_json, resolved_db_url, resume_command, workers_option,
)
from sumo_cli.cli.markup import esc

#: Where the report goes without --out (relative to the current folder).
DEFAULT_OUT = Path("docs/results")


@friendly
def report(
    ctx: typer.Context,
    out: Path = typer.Option(DEFAULT_OUT, "--out", help="Folder of the report (report.md, its PNGs and report-files.txt, the list a new report replaces)."),
    run: bool = typer.Option(False, "--run", help="First run the experiments the database holds nothing of."),
    quick: bool = typer.Option(False, "--quick", help="With --run: small versions (seconds to minutes), for a first look and tests."),
    workers: Optional[int] = workers_option("Parallel games of what --run runs"),
    json_out: bool = typer.Option(False, "--json", help="Print the report's path, parts and what is missing as JSON."),
    regenerate: Optional[str] = typer.Option(None, "--regenerate-with", help="The command the report names as the one "
                                             "that regenerates it (default: this one, with its --db), e.g. a script "
                                             "that first runs the experiments into a fresh database."),
) -> None:
    """Render every experiment the database holds into OUT/report.md with PNGs; print the command of each missing one.

    Parts: Figs. 3, 5, 6, 7, 8, the top-5 and calibration tables; beyond the paper, Nash averaging of each tournament."""
    from sumo_cli.errors import UserError
    from sumo_cli.report import render

    if quick and not run:
        raise UserError("--quick sizes what --run runs; add --run (or leave --quick out to only render)")
    if regenerate is not None and not regenerate.strip():
        raise UserError("--regenerate-with is empty; give the command that regenerates the report, or leave it out")
    if workers is not None and workers < 1:
        raise UserError(f"--workers must be at least 1, got {workers}")
    shown = str(out)  # as given, for the command the report names
    out = out.expanduser().resolve()
    render.check_out(out)
    db = open_db(ctx)
    from sumo_cli.report import build as B

    t0 = time.perf_counter()
    if run:
        _run_missing(ctx, db, quick, workers)
    tmp = render.staging(out)
    try:
        report_ = B.build(db, tmp, workers, say=(lambda line: None) if json_out else
                          (lambda line: err_console.print(line, highlight=False)))
        path = render.write(report_, tmp, out, regenerate or resume_command(ctx, f"report --out {shlex.quote(shown)}"))
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    seconds = time.perf_counter() - t0
    figures = sorted(out.glob("*.png"))
    if json_out:
        print_json({"report": str(path), "figures": [str(f) for f in figures], "seconds": round(seconds, 1),
                    "parts": [{"key": s.key, "title": s.title, "runs": s.runs,
                               "verdicts": [{"claim": v.claim, "status": v.status, "reason": v.reason} for v in s.verdicts]}
                              for s in report_.sections],
                    "missing": [{"key": m.key, "title": m.title, "command": m.command, "quick": m.quick,
                                 "lacking": m.lacking}
                                for m in report_.missing]})
        return
    err_console.print(f"wrote {path} with {len(figures)} figures ({len(report_.sections)} parts) in {seconds:.1f} s",
                      highlight=False)
    for m in report_.missing:
        err_console.print(f"[bold]not in the database[/]: {esc(m.title)}. Run it with:\n  {esc(m.command)}"
                          + (f"\n  or a small version: {esc(m.quick)}" if m.quick else ""), markup=True, highlight=False,
                          soft_wrap=True)
    if report_.missing:
        err_console.print("`sumo report --run` runs them all; `sumo report --run --quick` the small versions.")


def _run_missing(ctx: typer.Context, db, quick: bool, workers: Optional[int]) -> None:  # noqa: ANN001
    """Run each missing experiment's command in this process, one after the other; stop at the
    first that does not finish (its own message says why, or how to resume it)."""
    from sumo_cli.cli.app import app
    from sumo_cli.report.build import missing

    url = resolved_db_url(ctx)
    todo = missing(db, workers)
    for m in todo:
        cmd = m.quick if quick else m.command
        if cmd is None:
            err_console.print(f"skipped {m.title}: {m.why}", highlight=False, soft_wrap=True)
            continue
        if not quick and m.lacking:
            err_console.print(f"skipped {m.title}: the database lacks {len(m.lacking)} of the agents it needs "
                              f"({', '.join(m.lacking[:6])}{', ...' if len(m.lacking) > 6 else ''}); "
                              "`sumo report --run --quick` plays a small version on the agents it has",
                              highlight=False, soft_wrap=True)
            continue
        for one in cmd.split(" && "):
            err_console.print(f"[bold]running[/] {esc(m.title)}: {esc(one)}", markup=True, highlight=False, soft_wrap=True)
            code = app(["--db", url, *shlex.split(one)[1:]], prog_name="sumo", standalone_mode=False)
            if code:
                break
        if code:
            if code == 130:
                err_console.print("the report was not written; when the run above is finished, run "
                                  "`sumo report` again", highlight=False)
            raise typer.Exit(code)
