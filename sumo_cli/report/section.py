"""What one part of the report is: the paper's finding, our verdicts on it (computed), the body
(Markdown), its figures, and the runs and commands it came from; or, when the database holds
nothing for it, the command that runs it."""

from __future__ import annotations

from dataclasses import dataclass, field

AGREES = "agrees"
DISAGREES = "disagrees"
UNDECIDED = "cannot tell"


@dataclass
class Verdict:
    """One computed comparison with the paper: ``status`` is AGREES, DISAGREES or UNDECIDED;
    ``reason``: the numbers behind it, one sentence."""

    claim: str
    status: str
    reason: str

    def markdown(self) -> str:
        mark = {AGREES: "**agrees**", DISAGREES: "**disagrees**", UNDECIDED: "**cannot tell**"}[self.status]
        return f"- {self.claim}: {mark}: {self.reason}"


@dataclass
class Figure:
    file: str  # name inside the report folder
    caption: str


@dataclass
class Section:
    key: str  # fig3, fig5, fig6, fig7, fig8, calibration, nash
    title: str
    finding: str  # the paper's finding, one sentence (empty for what goes beyond the paper)
    verdicts: list[Verdict] = field(default_factory=list)
    body: list[str] = field(default_factory=list)  # Markdown lines
    figures: list[Figure] = field(default_factory=list)
    runs: list[int] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)  # the commands that produced the runs
    beyond: bool = False  # goes beyond the paper: ``finding`` says what is asked and why


@dataclass
class Missing:
    """An experiment the database holds no run of."""

    key: str
    title: str
    finding: str
    why: str  # what is missing, one sentence
    command: str  # the command that runs it at the paper's scale
    # the small version `sumo report --run --quick` runs (commands joined by " && "); None if it cannot run here
    quick: str | None = None
    # the agents ``command`` needs that the database lacks (`sumo report --run` skips it while any are)
    lacking: list[str] = field(default_factory=list)


def verdict(claim: str, ours: bool | None, reason: str) -> Verdict:
    return Verdict(claim, UNDECIDED if ours is None else AGREES if ours else DISAGREES, reason)


def md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table (cells' pipes escaped)."""
    def cell(x: object) -> str:
        return str(x).replace("|", "\\|")

    out = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows]
    return out
