"""User text printed through Rich (names, paths, plans, commands, error messages) is text, never
markup: the stderr console reads no markup unless a call asks for it with ``markup=True``, and such a
call passes every piece of user text through :func:`esc`."""

from __future__ import annotations

from rich.markup import escape


def esc(value: object) -> str:
    """``value`` as text that Rich markup prints as it is (``[/b]`` stays ``[/b]``)."""
    return escape(str(value))
