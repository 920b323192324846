"""The agents shipped in the repository's ``policies/`` folder, registered in every database.

``policies/manifest.json`` lists them::

    {"format": "sumo-policies", "format_version": 1,
     "agents": [{"name": "ant-mlp", "body": "ant", "arch": "mlp", "strategy": "none",
                 "default_version": 240,
                 "versions": [{"version": 240, "file": "ant-mlp/v00240", "sha256": "...",
                               "iteration": 240, "env_steps": 7864320}],
                 "provenance": {"command": "sumo train ...", "seed": 4, "env_steps": ...,
                                "wall_seconds": ..., "code_commit": "...", "notes": "..."}}]}

Each version is a checkpoint pair (``<file>.safetensors`` + ``<file>.json``, see
:mod:`sumo_cli.nets.checkpoint`); the database records the file's path and the manifest's SHA-256,
which is checked before the file is parsed, as for every checkpoint. :func:`register_shipped` adds
the agents a database does not have yet and updates those it holds from an earlier shipping (an
agent of the user's with the same name is left alone), so every database sees the current ones
without the user doing anything. ``SUMO_POLICIES`` names another folder, also for a database that
registered the agents from elsewhere: their files are then read from it (each checked against the
manifest's SHA-256); set to an empty string, it turns the shipped agents off.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.exc import IntegrityError

from sumo_cli.errors import UserError
from sumo_cli.store import registry
from sumo_cli.store.database import Database

FORMAT = "sumo-policies"
FORMAT_VERSION = 1
PROVENANCE = "shipped"


def policies_dir() -> Path | None:
    """The folder of shipped agents: ``SUMO_POLICIES`` when set (empty: none), else ``policies/``
    at the root of this checkout."""
    env = os.environ.get("SUMO_POLICIES")
    if env is not None:
        return Path(env).expanduser().resolve() if env.strip() else None
    return Path(__file__).resolve().parents[2] / "policies"


@dataclass
class ShippedVersion:
    version: int
    path: Path  # checkpoint base (no suffix)
    sha256: str
    iteration: int | None
    env_steps: int | None


@dataclass
class ShippedAgent:
    name: str
    body: str
    arch: str
    strategy: str
    default_version: int | None
    versions: list[ShippedVersion]
    provenance: dict


def read_manifest(folder: Path | None = None) -> list[ShippedAgent]:
    """The agents of the manifest in ``folder`` (default :func:`policies_dir`); none when there is
    no folder or no manifest. A malformed manifest is an error (the repository is broken)."""
    if folder is None:
        folder = policies_dir()
        named = os.environ.get("SUMO_POLICIES")
        if folder is not None and named is not None and not (folder / "manifest.json").is_file():
            # a folder the user named, not there: say so (the command would answer "no agents" instead)
            what = "does not exist" if not folder.exists() else "holds no manifest.json (no shipped agents)"
            raise UserError(f"SUMO_POLICIES={named}: the folder {folder} {what}; unset SUMO_POLICIES for the agents "
                            "shipped in policies/, or set it empty to turn shipped agents off")
    if folder is None or not (folder / "manifest.json").is_file():
        return []
    doc = json.loads((folder / "manifest.json").read_text())
    if doc.get("format") != FORMAT or doc.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{folder / 'manifest.json'} is not a {FORMAT} v{FORMAT_VERSION} manifest")
    out = []
    for a in doc["agents"]:
        versions = [ShippedVersion(int(v["version"]), folder / v["file"], str(v["sha256"]), v.get("iteration"),
                                   v.get("env_steps")) for v in a["versions"]]
        out.append(ShippedAgent(a["name"], a["body"], a["arch"], a["strategy"], a.get("default_version"), versions,
                                dict(a.get("provenance", {}))))
    return out


def _out_of_date(held: tuple[str, int | None, dict[int, str]] | None, shipped: ShippedAgent) -> bool:
    """Whether the database lacks this shipped agent, or holds an earlier shipping of it (a version
    missing or with another SHA-256, or another default); ``held`` is its entry of
    :func:`registry.version_hashes`. A user's own agent of the name is left alone."""
    if held is None:
        return True
    provenance, default, hashes = held
    return provenance == PROVENANCE and (default != shipped.default_version
                                         or any(hashes.get(v.version) != v.sha256 for v in shipped.versions))


def _moved(held: tuple[str, int | None, dict[int, str]] | None, paths: dict[int, str] | None,
           shipped: ShippedAgent) -> bool:
    """Whether the database reads a shipped agent's files from another folder than the one shipping
    it now (``SUMO_POLICIES`` names a copy, or the checkout moved): the files of the folder in use are
    the ones read, each checked against its SHA-256 before it is parsed."""
    if held is None or held[0] != PROVENANCE:
        return False
    return any((paths or {}).get(v.version, str(v.path)) != str(v.path) for v in shipped.versions)


def _present(checkpoint: str) -> bool:
    """Whether a version's tensors file is there (a checkpoint path names ``<base>`` or ``<base>.safetensors``)."""
    p = Path(checkpoint)
    return (p if p.name.endswith(".safetensors") else p.with_name(p.name + ".safetensors")).is_file()


def _forgettable(held: tuple[str, int | None, dict[int, str]] | None, paths: dict[int, str] | None,
                 shipped: ShippedAgent) -> set[int]:
    """The held versions of a shipped agent that it no longer ships and whose files are gone (a training
    run would draw them as opponents and fail to load them); forgotten unless a stored game names them."""
    if held is None or held[0] != PROVENANCE:
        return set()
    now = {v.version for v in shipped.versions}
    return {v for v, p in (paths or {}).items() if v not in now and not _present(p)}


def _stale(s, agents: list[ShippedAgent]) -> list[ShippedAgent]:  # noqa: ANN001 - a session
    """The shipped agents the database lacks, or holds from an earlier shipping, from another folder, or
    with versions to forget (the games table is read only when some version's file is gone)."""
    names = [a.name for a in agents]
    held, paths = registry.version_hashes(s, names), registry.version_paths(s, names)
    gone = {a.name: _forgettable(held.get(a.name), paths.get(a.name), a) for a in agents}
    unused = registry.unused_versions(s, [n for n, vs in gone.items() if vs]) if any(gone.values()) else {}
    return [a for a in agents if _out_of_date(held.get(a.name), a) or _moved(held.get(a.name), paths.get(a.name), a)
            or gone[a.name] & unused.get(a.name, set())]


def register_shipped(db: Database) -> list[str]:
    """Register the shipped agents that ``db`` does not have, and bring up to date the ones it holds
    from an earlier shipping (a re-shipped agent: its versions' files and hashes, its default and
    provenance; a version no longer shipped stays while its file does or a game names it, else it is
    forgotten); returns their names. Safe to run from several processes at once (a concurrent
    registration wins; this one then adds nothing)."""
    agents = read_manifest()
    if not agents:
        return []
    with db.read() as s:
        todo = _stale(s, agents)
    if not todo:
        return []
    try:
        with db.write() as s:
            done = []
            for a in _stale(s, todo):  # again inside the write: a concurrent registration may have done it
                agent = registry.get_agent(s, a.name)
                origin = {"source": "policies", **a.provenance}
                if agent is None:
                    agent = registry.create_agent(s, a.name, a.body, a.arch, a.strategy, PROVENANCE, origin)
                agent.origin = origin
                have = {v.version: v for v in agent.versions}
                now = {v.version for v in a.versions}
                for version, row in list(have.items()):
                    if version not in now and not _present(row.checkpoint_path):
                        registry.drop_version_if_unused(s, row)
                for v in a.versions:
                    metrics = {"env_steps": v.env_steps} if v.env_steps is not None else None
                    row = have.get(v.version)
                    if row is None:
                        registry.add_version(s, agent, v.version, str(v.path), v.sha256, iteration=v.iteration,
                                             metrics=metrics)
                    elif row.sha256 != v.sha256 or row.checkpoint_path != str(v.path):
                        row.checkpoint_path, row.sha256, row.iteration = str(v.path), v.sha256, v.iteration
                        row.metrics = metrics or {}
                registry.set_default_version(agent, a.default_version)
                done.append(a.name)
            return done
    except IntegrityError:
        return []


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def ship_entry(folder: Path, name: str, body: str, arch: str, strategy: str,
               versions: list[tuple[int, Path, str, int | None, int | None]], provenance: dict,
               default_version: int | None = None) -> dict:
    """Copy checkpoints into ``folder`` as agent ``name`` and return its manifest entry (not written).
    ``versions``: (version, checkpoint base, expected SHA-256, iteration, env steps); every file is
    checked against its hash before it is copied."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for version, base, sha, iteration, steps in versions:
        src = Path(str(base).removesuffix(".safetensors"))
        rel = f"{name}/v{version:05d}"
        dest = folder / rel
        if dest.with_suffix(".json").is_file() and dest.with_suffix(".safetensors").is_file() \
                and _sha256(dest.with_suffix(".safetensors")) == sha:  # shipped already: not rewritten
            entries.append({"version": version, "file": rel, "sha256": sha, "iteration": iteration, "env_steps": steps})
            continue
        if _sha256(src.with_suffix(".safetensors")) != sha:
            raise ValueError(f"{src}.safetensors does not match its recorded SHA-256")
        (folder / name).mkdir(exist_ok=True)
        for suffix in (".safetensors", ".json"):
            shutil.copyfile(src.with_suffix(suffix), folder / (rel + suffix))
        entries.append({"version": version, "file": rel, "sha256": sha, "iteration": iteration, "env_steps": steps})
    return {"name": name, "body": body, "arch": arch, "strategy": strategy, "default_version": default_version,
            "versions": entries, "provenance": provenance}


def write_manifest(folder: Path, agents: list[dict], keep: bool = False) -> None:
    """Write ``folder``'s manifest with ``agents`` (with ``keep``, over the entries it holds: an entry of
    the same name is replaced) and the total size of the files it ships."""
    manifest = folder / "manifest.json"
    doc = {"format": FORMAT, "format_version": FORMAT_VERSION, "agents": []}
    if keep and manifest.is_file():
        doc = json.loads(manifest.read_text())
    new = {a["name"] for a in agents}
    doc["agents"] = sorted([a for a in doc["agents"] if a["name"] not in new] + agents, key=lambda a: a["name"])
    doc["total_bytes"] = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and p.suffix in (".safetensors", ".json")
                             and p.name != "manifest.json")
    manifest.write_text(json.dumps(doc, indent=2) + "\n")


def _renamed(folder: Path, by_name: dict[str, dict], renames: dict[str, str], provenance: dict[str, dict]) -> None:
    """Ship the agents ``renames`` names (old -> new) under their new names: check that every folder
    they use moves with them (a tracking sibling shares its source's folder), then move the folders,
    rewrite the entries (``provenance[old]`` added to each one's provenance) and the manifest."""
    unknown = [n for n in renames if n not in by_name]
    if unknown:
        raise UserError(f"{', '.join(unknown)}: not shipped in {folder}")
    taken = [new for new in renames.values() if new in by_name]
    if taken:
        raise UserError(f"{', '.join(taken)}: already shipped in {folder}")
    folders = {n: {v["file"].partition("/")[0] for v in by_name[n]["versions"]} for n in renames}
    stray = sorted(f for fs in folders.values() for f in fs if f not in renames)
    if stray:
        raise UserError(f"{stray[0]} holds files of an agent renamed here, and is not renamed with it")
    for old, new in renames.items():
        if old in set().union(*folders.values()):
            os.replace(folder / old, folder / new)
    for old, new in renames.items():
        a = by_name.pop(old)
        a["versions"] = [{**v, "file": f"{renames[v['file'].partition('/')[0]]}/{v['file'].partition('/')[2]}"}
                         for v in a["versions"]]
        a["name"] = new
        a["provenance"] = {**a["provenance"], **provenance[old]}
        by_name[new] = a
    write_manifest(folder, list(by_name.values()))


def _entries(folder: Path) -> dict[str, dict]:
    return {a["name"]: a for a in json.loads((folder / "manifest.json").read_text())["agents"]}


def retire(folder: Path, names: list[str], prefix: str, why: str) -> list[str]:
    """Keep the shipped agents ``names`` under ``<prefix>-<name>`` before their names ship anew: their
    files move to the new name's folder (an entry sharing a retired agent's files, a tracking sibling,
    follows them), their provenance says why. The runs archived in docs/runs/ name the versions they
    played by SHA-256, and :mod:`sumo_cli.store.archive` finds a retired one under its new name, so a
    re-shipped population does not void them. Returns the new names."""
    renames = {n: f"{prefix}-{n}" for n in names}
    by_name = _entries(folder)
    for a in by_name.values():  # games measured against a retired version name it as it ships from now on
        quality = a["provenance"].get("quality")
        if quality and "games" in quality:
            quality["games"] = {_retired_key(k, renames): g for k, g in quality["games"].items()}
    _renamed(folder, by_name, renames, {n: {"retired": {"was": n, "why": why}} for n in names})
    return list(renames.values())


def _retired_key(key: str, renames: dict[str, str]) -> str:
    """``name@version[ unadapted]`` with ``name`` renamed when it is retired."""
    name, at, rest = key.partition("@")
    return f"{renames[name]}@{rest}" if at and name in renames else key


def promote(folder: Path, name: str, member: str, plan_step: dict, paper_did: str) -> None:
    """Ship the agent ``name`` (shipped beside the population) as the population member ``member``,
    filled by the plan step ``plan_step`` whose options its run was trained with: its files move,
    its provenance keeps how it was trained and adds the step (so `sumo population train` counts the
    step done from shipped) and what it was shipped as before. The member's earlier agent is retired
    first (:func:`retire`)."""
    _renamed(folder, _entries(folder), {name: member},
             {name: {"plan_step": plan_step, "shipped_as": name, "paper_did": paper_did}})


def ship(folder: Path, name: str, body: str, arch: str, strategy: str,
         versions: list[tuple[int, Path, str, int | None, int | None]], provenance: dict,
         default_version: int | None = None) -> dict:
    """Copy checkpoints into ``folder`` as agent ``name`` and record it in the manifest (replacing
    an entry of the same name). Returns the manifest entry."""
    entry = ship_entry(folder, name, body, arch, strategy, versions, provenance, default_version)
    write_manifest(folder, [entry], keep=True)
    return entry


def ship_half_entry(folder: Path, name: str, body: str, arch: str, strategy: str,
                    versions: list[tuple[int, Path, str, int | None, int | None]], provenance: dict,
                    default_version: int | None = None) -> dict:
    """As :func:`ship_entry`, but each version is written as a float16 copy
    (:func:`sumo_cli.nets.half.save_half`; the source checked against its SHA-256 first) and the
    manifest records the copy's hash; the entry's provenance says ``stored_dtype: float16``."""
    from sumo_cli.nets.half import STORED_DTYPE, save_half

    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for version, base, sha, iteration, steps in versions:
        rel = f"{name}/v{version:05d}"
        try:
            digest = save_half(Path(str(base).removesuffix(".safetensors")), sha, folder / rel)
        except UserError as exc:
            raise ValueError(str(exc)) from exc
        entries.append({"version": version, "file": rel, "sha256": digest, "iteration": iteration, "env_steps": steps})
    return {"name": name, "body": body, "arch": arch, "strategy": strategy, "default_version": default_version,
            "versions": entries, "provenance": {**provenance, "stored_dtype": STORED_DTYPE}}
