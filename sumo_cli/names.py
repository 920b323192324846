"""The agent name grammar users type on the command line.

    <body>-<arch>                      no adaptation           bug-lstm, ant-mlp
    <body>-[<arch>-]track              PPO tracking            ant-track (lstm), spider-mlp-track
    <body>-[<arch>-]meta               meta-learned updates    ant-meta (lstm), spider-mlp-meta
    <body>-rl2                         RL^2                    bug-rl2
    zoo-<body>-<arch>-v<k>             an imported original RoboSumo policy
    loco-<arch>, loco-[<arch>-]track,  the same combinations trained for nonstationary locomotion
    loco-[<arch>-]meta, loco-rl2       (``sumo train --env locomotion``; not sumo players)
    <combination>-<k>                  the k-th agent of a combination (k >= 2): a training run's
                                       default name when a shipped agent holds the canonical one
    <custom>                           a name given to a training run with --name

Any of them may end in ``@<version>`` to pick a snapshot, and then in ``:<strategy>`` (none, track or
meta) to play the policy with another adaptation strategy than the one it was trained with
(``ant-lstm:track``, ``bug-lstm@20:meta``): every command that plays agents takes it, so a shipped
policy can adapt without a training run first. The seven combinations have one
canonical spelling (``ant-lstm-meta`` is stored as ``ant-meta``) so that two spellings of the same
agent can never become two agents.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from sumo_cli.errors import UserError

BODIES = ("ant", "bug", "spider")
#: The pseudo-body of agents trained on nonstationary locomotion (a six-legged Bug, no opponent).
LOCOMOTION = "loco"
ARCHS = ("mlp", "lstm")
STRATEGIES = ("none", "track", "meta", "rl2")
#: The strategies a policy can be played with after ``:`` (RL^2 needs a policy trained for its inputs).
PLAY_STRATEGIES = ("none", "track", "meta")

#: The paper's seven policy/adaptation combinations, as (arch, strategy).
COMBINATIONS = (
    ("mlp", "none"),
    ("mlp", "track"),
    ("mlp", "meta"),
    ("lstm", "none"),
    ("lstm", "track"),
    ("lstm", "meta"),
    ("lstm", "rl2"),
)

_CUSTOM = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,63}$")
_NUMBERED = re.compile(r"^(?P<head>.+)-(?P<k>\d+)$")
_ZOO = re.compile(r"^zoo-(?P<body>[a-z]+)-(?P<arch>[a-z0-9]+)-v(?P<k>\d+)$")


@dataclass(frozen=True)
class AgentRef:
    """A parsed name: ``name`` is canonical; body/arch/strategy are None for custom names (strategy
    is the one the name spells, not ``played_as``); ``played_as`` is the strategy after ``:``."""

    name: str
    version: int | None
    body: str | None = None
    arch: str | None = None
    strategy: str | None = None
    played_as: str | None = None

    @property
    def display(self) -> str:
        text = self.name if self.version is None else f"{self.name}@{self.version}"
        return text if self.played_as is None else f"{text}:{self.played_as}"


def canonical_name(body: str, arch: str, strategy: str) -> str:
    """The one spelling of a combination: lstm is implied for track and meta, rl2 is lstm."""
    if body not in BODIES and body != LOCOMOTION:
        raise UserError(f"unknown body {body!r}; choose one of {', '.join(BODIES)}")
    if (arch, strategy) not in COMBINATIONS:
        raise UserError(
            f"{arch}/{strategy} is not one of the paper's combinations: "
            + ", ".join(f"{a}/{s}" for a, s in COMBINATIONS)
        )
    if strategy == "none":
        return f"{body}-{arch}"
    if strategy == "rl2":
        return f"{body}-rl2"
    return f"{body}-{strategy}" if arch == "lstm" else f"{body}-{arch}-{strategy}"


def _parse_combination(base: str) -> tuple[str, str, str] | None:
    """(body, arch, strategy) when ``base`` spells one of the seven combinations, else None."""
    parts = base.split("-")
    if len(parts) not in (2, 3) or (parts[0] not in BODIES and parts[0] != LOCOMOTION):
        return None
    body, rest = parts[0], parts[1:]
    if rest == ["rl2"]:
        return body, "lstm", "rl2"
    if len(rest) == 1 and rest[0] in ARCHS:
        return body, rest[0], "none"
    if len(rest) == 1 and rest[0] in ("track", "meta"):
        return body, "lstm", rest[0]
    if len(rest) == 2 and rest[0] in ARCHS and rest[1] in ("track", "meta"):
        return body, rest[0], rest[1]
    return None


def numbered_name(canonical: str, k: int) -> str:
    """The k-th agent of a combination (k >= 2): ``ant-mlp-2``."""
    return f"{canonical}-{k}"


def all_combination_names() -> list[str]:
    return [canonical_name(b, a, s) for b in BODIES for a, s in COMBINATIONS]


def locomotion_names() -> list[str]:
    """The seven combinations as locomotion agents (``loco-mlp`` .. ``loco-rl2``)."""
    return [canonical_name(LOCOMOTION, a, s) for a, s in COMBINATIONS]


def parse(text: str) -> AgentRef:
    """Parse what a user typed: ``NAME[@V][:STRATEGY]``. Raises UserError for names no agent could
    ever have."""
    raw, colon, played_as = text.strip().lower().partition(":")
    if colon:
        played_as = played_as.strip()
        if played_as not in PLAY_STRATEGIES:
            raise UserError(f"{text!r}: the strategy after ':' must be one of {', '.join(PLAY_STRATEGIES)}, "
                            f"e.g. ant-lstm:track")
    ref = _parse_name(text, raw.strip())
    return ref if not colon else AgentRef(ref.name, ref.version, ref.body, ref.arch, ref.strategy, played_as)


def without_strategy(text: str, where: str, because: str = "it plays no games, so no agent adapts") -> str:
    """``text`` when it names no ``:STRATEGY``; else one sentence: ``where`` takes agents that do
    not adapt there (a training opponent, a teacher, single bouts), so a strategy would mean nothing."""
    if ":" in text:
        raise UserError(f"{where} takes agent names without ':STRATEGY' ({because}); "
                        f"drop ':{text.partition(':')[2].strip()}' from {text.strip()!r}")
    return text


def _parse_name(text: str, raw: str) -> AgentRef:
    base, at, ver = raw.partition("@")
    version = None
    if at:
        if not ver.isdigit() or int(ver) < 1:
            raise UserError(f"{text!r}: a version after '@' must be a positive integer, e.g. ant-meta@3")
        version = int(ver)
    if not base:
        raise UserError("an agent name is empty")
    combo = _parse_combination(base)
    if combo:
        body, arch, strategy = combo
        return AgentRef(canonical_name(body, arch, strategy), version, body, arch, strategy)
    numbered = _NUMBERED.match(base)
    if numbered and _parse_combination(numbered["head"]) and int(numbered["k"]) >= 2:
        body, arch, strategy = _parse_combination(numbered["head"])
        return AgentRef(numbered_name(canonical_name(body, arch, strategy), int(numbered["k"])), version, body, arch,
                        strategy)
    m = _ZOO.match(base)
    if m:
        body, arch = m["body"], m["arch"]
        if body not in BODIES or arch not in ARCHS:
            raise UserError(
                f"{text!r}: zoo agents are named zoo-<body>-<arch>-v<k> with body in "
                f"{'/'.join(BODIES)} and arch in {'/'.join(ARCHS)}"
            )
        return AgentRef(base, version, body, arch, "none")
    head = base.split("-")[0]
    if head in BODIES or head == LOCOMOTION or (base.startswith("zoo-")):
        # Looks like a combination or a zoo name but is not one: say what would be right.
        close = difflib.get_close_matches(base, all_combination_names() + locomotion_names(), n=3, cutoff=0.6)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UserError(
            f"{text!r} is not a valid agent name (<body>-<arch>, <body>-[<arch>-]track, "
            f"<body>-[<arch>-]meta, <body>-rl2, any of them numbered -2, -3, ..., zoo-<body>-<arch>-v<k>){hint}"
        )
    if not _CUSTOM.match(base):
        raise UserError(
            f"{text!r} is not a valid agent name: use lower-case letters, digits, '-', '_' or '.', "
            "at most 64 characters"
        )
    return AgentRef(base, version)


def validate_custom_name(name: str) -> str:
    """A name given to a training run must not shadow the grammar (so it can never be ambiguous)."""
    if ":" in name:
        raise UserError(f"{name!r} cannot be a custom agent name: ':' marks the strategy an agent is played with")
    ref = parse(name)
    if ref.body is not None or ref.version is not None:
        raise UserError(
            f"{name!r} cannot be a custom agent name: it reads as a built-in name; pick another, e.g. my-{name}"
        )
    return ref.name


def close_matches(name: str, known: list[str], n: int = 5) -> list[str]:
    return difflib.get_close_matches(name, known, n=n, cutoff=0.5)
