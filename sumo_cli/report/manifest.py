"""The report's folder holds a manifest of the files the report wrote there; a new report replaces
those files only, and refuses a folder that holds anything else (it never deletes what it did not
write)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from sumo_cli.errors import UserError

#: One file name a line: the files the last report wrote into this folder (this one included).
MANIFEST = "report-files.txt"
_HEADER = "# written by `sumo report`; the next report replaces exactly these files\n"


def written(out: Path) -> list[str]:
    """The files the last report wrote into ``out`` (none for a folder without a manifest)."""
    path = out / MANIFEST
    if not path.is_file():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [ln for ln in lines if ln and not ln.startswith("#") and "/" not in ln and ln not in (".", "..")]


def check(out: Path) -> None:
    """Refuse, in one sentence and before anything is written, a folder the report may not write:
    a file, a folder under a missing or unwritable one, or a folder holding files no report wrote."""
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a folder for the report and its figures")
    if not out.parent.is_dir():
        raise UserError(f"the folder {out.parent} does not exist; create it first")
    if out.is_dir():
        ours = set(written(out)) | {MANIFEST}
        others = sorted(p.name for p in out.iterdir() if p.name not in ours and not p.name.startswith(f".{MANIFEST}.tmp-"))
        if others:
            shown = ", ".join(others[:5]) + (f" and {len(others) - 5} more" if len(others) > 5 else "")
            raise UserError(f"--out {out} holds files that no earlier report wrote there ({shown}); give an empty or "
                            f"new folder, or one holding only an earlier report (its {MANIFEST} lists them)")
    _probe(out if out.is_dir() else out.parent)


def _probe(folder: Path) -> None:
    """A folder the report cannot write into (read-only, /proc, ...) is refused now, not after the work."""
    try:
        probe = tempfile.mkdtemp(prefix=".sumo-report-probe-", dir=folder)
        os.rmdir(probe)
    except OSError as e:
        raise UserError(f"cannot create files in {folder} ({e.strerror or e}); give --out a folder you can write to") from None


def publish(tmp: Path, out: Path) -> None:
    """Move the finished report from ``tmp`` into ``out``, replacing the files the last report wrote
    there and deleting those of them this one did not write again; nothing else in ``out`` is touched."""
    out.mkdir(exist_ok=True)
    old = set(written(out))
    new = sorted(p.name for p in tmp.iterdir() if p.is_file() and p.name != MANIFEST)
    # the manifest first names both, so that an interrupted publish leaves no file unlisted
    _write_manifest(out, sorted(old | set(new)))
    for name in new:
        os.replace(tmp / name, out / name)
    for name in sorted(old - set(new)):
        (out / name).unlink(missing_ok=True)
    _write_manifest(out, new)


def _write_manifest(out: Path, names: list[str]) -> None:
    part = out / f".{MANIFEST}.tmp-{os.getpid()}"
    part.write_text(_HEADER + "".join(f"{n}\n" for n in names), encoding="utf-8")
    os.replace(part, out / MANIFEST)
