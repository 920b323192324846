"""Keep shipped agents under a new name before their names ship anew (a maintainer's tool).

    python scripts/retire_agents.py --prefix pop1 --why "..." spider-lstm spider-track

A population member re-trained by a new plan step ships under its canonical name; the runs archived
in docs/runs/ played the earlier versions, named by SHA-256. Retired first, those versions stay
shipped as ``<prefix>-<name>`` (their files moved, not copied) and the archives import as before
(sumo_cli/store/shipped.py, ``retire``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sumo_cli.errors import UserError
from sumo_cli.store import shipped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="+")
    ap.add_argument("--prefix", required=True)
    ap.add_argument("--why", required=True, help="the provenance's reason, e.g. which plan step replaces them")
    ap.add_argument("--to", default=str(Path(__file__).resolve().parents[1] / "policies"))
    args = ap.parse_args(argv)
    try:
        new = shipped.retire(Path(args.to), args.names, args.prefix, args.why)
    except UserError as exc:
        print(exc)
        return 2
    print(f"retired {', '.join(args.names)} as {', '.join(new)} in {args.to}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
