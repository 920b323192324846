"""Tables that keep names and figures whole at any terminal width (80 columns in a pipe or a CI
log): cells wrap only at spaces, and when even that does not fit, the least important columns
are left out. Rich itself would cut words ("ant-meta…") when a table is too wide, so the widths
are worked out here and each cell is wrapped before Rich sees it."""

from __future__ import annotations

import textwrap

from rich.table import Table


def _words(text: str) -> int:
    return max((len(w) for line in text.splitlines() for w in line.split()), default=0)


def _lines(text: str) -> int:
    return max((len(line) for line in text.splitlines()), default=0)


def _overhead(n: int) -> int:
    return 3 * n + 1  # one space of padding either side and one border per column, plus the last border


def whole_words_table(title: str, headers: list[str], rows: list[list[str]], width: int,
                      drop_order: tuple[str, ...] = (), left: tuple[str, ...] = ()) -> Table:
    """``rows`` of cell texts under ``headers``, at most ``width`` wide where possible. Columns in
    ``drop_order`` go, first first, while even one word per line cannot fit; then the widest
    columns are narrowed, their cells wrapped at spaces. Columns in ``left`` are left-aligned."""
    n = len(headers)
    cols = [[headers[i], *(r[i] for r in rows)] for i in range(n)]
    least = [max(_words(c) for c in col) for col in cols]
    keep = list(range(n))
    for name in drop_order:
        if sum(least[i] for i in keep) + _overhead(len(keep)) <= width:
            break
        keep = [i for i in keep if headers[i] != name]
    widths = {i: max(_lines(c) for c in cols[i]) for i in keep}
    excess = sum(widths.values()) + _overhead(len(keep)) - width
    while excess > 0:
        shrinkable = [i for i in keep if widths[i] > least[i]]
        if not shrinkable:
            break  # wider than the terminal even so: Rich crops, and words stay whole on each line
        i = max(shrinkable, key=lambda j: widths[j] - least[j])
        cut = min(excess, widths[i] - least[i])
        widths[i] -= cut
        excess -= cut

    def wrap(text: str, w: int) -> str:
        return "\n".join(textwrap.fill(line, w, break_long_words=False, break_on_hyphens=False) or line
                         for line in text.splitlines() or [""])

    table = Table(title=title)
    for i in keep:
        table.add_column(wrap(headers[i], widths[i]), justify="left" if headers[i] in left else "right",
                         width=widths[i], no_wrap=True)
    for r in rows:
        table.add_row(*(wrap(r[i], widths[i]) for i in keep))
    return table
