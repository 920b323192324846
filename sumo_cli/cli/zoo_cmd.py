"""`sumo zoo import PATH`: the original RoboSumo policies as playable agents."""

from __future__ import annotations

from pathlib import Path

import typer

from sumo_cli.cli.common import err_console, friendly, open_db, print_json

app = typer.Typer(help="Import the original RoboSumo policy zoo.", no_args_is_help=True)


@app.command("import")
@friendly
def import_(
    ctx: typer.Context,
    path: str = typer.Argument(
        ...,
        help="A copy of the archived robosumo repository, or a folder of <body>-<arch>-v<k>.npy files.",
    ),
    json_out: bool = typer.Option(False, "--json", help="Print JSON on stdout."),
) -> None:
    """Import the 18 original policies as agents zoo-<body>-<arch>-v<k> (no adaptation)."""
    from sumo_cli.errors import UserError

    if not path.strip():  # "$SUMO_ZOO_DIR" unset or empty: not the current folder
        raise UserError("zoo import needs the folder of the original policies, got an empty PATH "
                        "(is SUMO_ZOO_DIR set?)")
    path = Path(path)
    if not path.is_dir():  # answered before torch loads (seconds)
        raise UserError(f"zoo folder {path} does not exist or is not a folder")
    from sumo_cli.store.library import import_zoo

    db = open_db(ctx)
    report = import_zoo(db, path)
    if json_out:
        print_json({"imported": report.imported, "skipped": report.skipped})
        return
    err_console.print(f"imported {len(report.imported)} agents" + (f", {len(report.skipped)} already present" if report.skipped else ""))
    for name in report.imported:
        err_console.print(f"  {name}")
