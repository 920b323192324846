"""`sumo bench env`: throughput of the simulation against raw MuJoCo, on this machine."""

from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console

from sumo_cli.cli.common import err_console, friendly, print_json, require_positive
from sumo_cli.errors import UserError

app = typer.Typer(help="Measure throughput on this machine.", no_args_is_help=True)


def _csv(text: Optional[str]) -> list[str] | None:
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    return items or None


@app.command("env")
@friendly
def env(
    quick: bool = typer.Option(False, "--quick", help="Fewer pairings, batch sizes and steps (about a minute)."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON on stdout."),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="Physics threads (raw MuJoCo gets the same); default: the usable cores."
    ),
    pairings: Optional[str] = typer.Option(
        None, "--pairings", help="Comma-separated body pairings, e.g. ant-ant,bug-spider (default: all six)."
    ),
    batch_sizes: Optional[str] = typer.Option(
        None, "--batch-sizes", help="Comma-separated batch sizes (default: 1,16,64; --quick: 1,16)."
    ),
    steps: Optional[int] = typer.Option(
        None, "--steps", help="Env steps per measurement, summed over the batch (default 2000; --quick 600)."
    ),
) -> None:
    """Batched env vs raw MuJoCo, batched vs one-bout-at-a-time play, fast vs faithful physics."""
    from sumo_cli.bench import env_bench as EB

    if threads is not None:
        require_positive(threads, "--threads")
    if steps is not None:
        require_positive(steps, "--steps")
    pair_list = _csv(pairings)
    for p in pair_list or []:
        try:
            EB.parse_pairing(p)
        except ValueError as exc:
            raise UserError(str(exc)) from None
    try:
        sizes = [int(x) for x in _csv(batch_sizes) or []] or None
    except ValueError:
        raise UserError(f"--batch-sizes takes comma-separated whole numbers, got {batch_sizes!r}") from None
    for n in sizes or []:
        require_positive(n, "each batch size")
    settings = EB.BenchSettings.make(quick=quick, pairings=pair_list, batch_sizes=sizes, steps=steps,
                                     threads=threads)
    cpu = EB.cpu_info()
    err_console.print(f"CPU: {cpu['model']} ({cpu['cores']} usable cores)", highlight=False)
    doc = EB.measure(settings, progress=lambda msg: err_console.print(f"  {msg}", style="dim", highlight=False))
    # the table needs ~110 columns; a terminal gets its own width, a pipe or file a wide one
    wide = err_console if err_console.is_terminal else Console(stderr=True, width=120)
    wide.print(EB.render_table(doc))
    sm = doc["summary"]
    err_console.print(
        f"env/raw {sm['env_over_raw']['min']:.2f}-{sm['env_over_raw']['max']:.2f}, "
        f"batched play x{sm['play_speedup']['min']:.1f}-{sm['play_speedup']['max']:.1f} over one bout at a time, "
        f"fast/faithful {sm['fast_over_faithful']['median']:.2f} (median), "
        f"fast env/raw {sm['fast_env_over_raw']['min']:.2f}-{sm['fast_env_over_raw']['max']:.2f} "
        f"({sm['env_over_raw']['over']}); {doc['seconds']:.0f} s",
        highlight=False,
    )
    if json_out:
        print_json(doc)
