"""The agent library: what joins checkpoints (nets) to the registry (store).

Importing the original zoo, saving a new version of an agent, and loading an agent version with
its checkpoint verified against the SHA-256 the database recorded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import torch

from sumo_cli import names
from sumo_cli.errors import UserError
from sumo_cli.nets.checkpoint import checkpoint_tensors, load_checkpoint, save_checkpoint
from sumo_cli.nets.policy import PolicySpec
from sumo_cli.store import registry
from sumo_cli.store.database import Database


@dataclass
class LoadedAgent:
    """An agent version ready to play: its parameters, normaliser statistics and the strategy it
    plays with (``trained_strategy`` unless the name asked for another, ``NAME:STRATEGY``)."""

    name: str
    version: int
    version_id: int
    body: str
    arch: str
    strategy: str
    spec: PolicySpec
    params: dict[str, torch.Tensor]
    obs_stats: dict[str, torch.Tensor]
    meta_params: dict[str, torch.Tensor]
    metadata: dict
    trained_strategy: str | None = None  # None: the same as ``strategy``

    @property
    def display(self) -> str:
        text = f"{self.name}@{self.version}"
        played_as = self.trained_strategy is not None and self.strategy != self.trained_strategy
        return f"{text}:{self.strategy}" if played_as else text


def load_agent(db: Database, name: str) -> LoadedAgent:
    with db.read() as s:
        rv = registry.resolve(s, name)
    path = Path(rv.checkpoint_path)
    ckpt = load_checkpoint(path, rv.sha256)
    if ckpt.spec.obs_dim <= 0:
        raise UserError(f"checkpoint of {rv.display} has an invalid policy spec")
    return LoadedAgent(
        name=rv.agent_name,
        version=rv.version,
        version_id=rv.version_id,
        body=rv.body,
        arch=rv.arch,
        strategy=rv.plays,
        spec=ckpt.spec,
        params=ckpt.params,
        obs_stats=ckpt.obs_stats,
        meta_params=ckpt.meta_params,
        metadata=ckpt.metadata,
        trained_strategy=rv.strategy,
    )


def training_curve_points(db: Database, name: str) -> tuple[list[int], int | None, dict | None]:
    """The stored versions of a trained agent, the env steps of one training iteration, and the
    checkpoint of its untrained start (``{"path", "sha256"}``, played as version 0), from its run."""
    from sumo_cli.store import runs as store_runs

    with db.read() as s:
        agent = registry.get_agent(s, names.parse(name).name)
        if agent is None:
            registry.resolve(s, name)  # raises the usual sentence with close matches
        versions = sorted(v.version for v in agent.versions)
        run_id = (agent.origin or {}).get("run_id")
        if run_id is None:
            return versions, None, None
        run = store_runs.get_run(s, run_id)
        train = (run.config or {}).get("train", {})
        steps = int(train.get("n_envs", 0)) * int(train.get("num_steps", 0)) or None
        return versions, steps, (run.state or {}).get("theta0")


def load_start(db: Database, name: str, theta0: dict) -> LoadedAgent:
    """A trained agent's untrained start (version 0), checked against its recorded SHA-256."""
    latest = load_agent(db, name)
    ckpt = load_checkpoint(Path(theta0["path"]), theta0["sha256"])
    return LoadedAgent(name=latest.name, version=0, version_id=-1, body=latest.body, arch=latest.arch,
                       strategy=latest.strategy, spec=ckpt.spec, params=ckpt.params, obs_stats=ckpt.obs_stats,
                       meta_params=ckpt.meta_params, metadata=ckpt.metadata, trained_strategy=latest.trained_strategy)


def checkpoint_file(db: Database, agent_name: str, version: int) -> Path:
    return registry.checkpoint_root(db.url) / agent_name / f"v{version:05d}"


@dataclass
class ImportReport:
    imported: list[str]
    skipped: list[str]


def import_zoo(db: Database, path: str | Path) -> ImportReport:
    """Import every original policy found under ``path`` as ``zoo-<body>-<arch>-v<k>`` (version 1).
    All files are parsed before anything is written, so a bad file leaves the database untouched."""
    from sumo_cli.nets.zoo import find_zoo_files, load_zoo_file

    found = find_zoo_files(path)
    parsed = []
    for body, arch, k, file in found:
        spec, params, obs_stats, meta = load_zoo_file(file, body, arch)
        source_sha = hashlib.sha256(Path(file).read_bytes()).hexdigest()
        parsed.append((f"zoo-{body}-{arch}-v{k}", body, arch, spec, params, obs_stats, meta, source_sha))
    imported, skipped = [], []
    with db.write() as s:
        for name, body, arch, spec, params, obs_stats, meta, source_sha in parsed:
            existing = registry.get_agent(s, name)
            if existing is not None:
                if existing.origin.get("source_sha256") != source_sha:
                    raise UserError(
                        f"{name} is already imported from a different file; remove it first or import another copy under a new database"
                    )
                skipped.append(name)
                continue
            base = checkpoint_file(db, name, 1)
            digest = save_checkpoint(
                base,
                checkpoint_tensors(params, obs_stats),
                spec,
                body=body,
                strategy="none",
                metadata={"agent": name, "version": 1, "origin": "robosumo-zoo", "return_filter": meta["return_filter"]},
            )
            agent = registry.create_agent(
                s, name, body, arch, "none", "zoo",
                {"source": "robosumo-zoo", "file": str(Path(meta["file"]).resolve()), "source_sha256": source_sha},
            )
            registry.add_version(s, agent, 1, str(base), digest)
            imported.append(name)
    return ImportReport(imported, skipped)
