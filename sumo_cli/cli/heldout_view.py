"""`sumo runs show` of a meta run: its held-out gain by meta-update and over the last 20% of them
(:mod:`sumo_cli.report.heldout`)."""

from __future__ import annotations

from sumo_cli.cli.common import err_console


def _f(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def print_heldout(curve: list[dict], last: dict | None) -> None:
    """A table of every measurement (meta-update, returns adapted and unadapted, gain, its 95% interval
    over the tasks, whether it lies above or below 0) and one line for the last 20% of meta-updates."""
    from sumo_cli.cli.tables import whole_words_table

    def side(c: dict) -> str:
        if c["low"] is None:
            return ""
        return "above 0" if c["low"] > 0 else "below 0" if c["high"] < 0 else "spans 0"

    rows = [[str(c["iteration"]), _f(c["adapted"]), _f(c["unadapted"]), _f(c["gain"]),
             f"{_f(c['low'])} to {_f(c['high'])}", side(c)] for c in curve]
    table = whole_words_table(f"held-out gain by meta-update ({len(curve)} measurements; next-version opponents)",
                              ["meta-update", "adapted", "unadapted", "gain", "95% interval", "interval"], rows,
                              err_console.width, drop_order=("interval", "unadapted", "adapted"))
    err_console.print(table)
    from sumo_cli.report.heldout import last_share_line

    err_console.print(last_share_line(last), highlight=False, soft_wrap=True)
