"""Policy checkpoints: tensors in one ``.safetensors`` file, metadata in a ``.json`` file beside it.

A checkpoint ``<base>`` is the pair ``<base>.safetensors`` + ``<base>.json`` (``path`` may be given
with or without the ``.safetensors`` suffix). No pickle anywhere, never ``torch.load``.

Tensors (any names; these are the conventions and the ones checked):
    the policy/value parameters of :mod:`sumo_cli.nets.policy` (``pi/...``, ``vf/...``, ``logstd``),
    ``obs_norm/sum`` (D), ``obs_norm/sumsq`` (D), ``obs_norm/count`` () - required: a checkpoint
    without its normaliser statistics plays differently from the agent that was trained,
    ``meta/alpha_<m>`` learned meta step sizes (optional), anything else the caller adds.

Metadata: ``format``, ``format_version``, ``spec``, ``body``, ``strategy``, ``code_version``
(``sumo_cli.__version__``), ``torch_version``, ``mujoco_version`` (from the installed package's
metadata, None if absent; nets never imports mujoco), ``tensors`` (name -> dtype and shape), plus
every key the caller passes in ``metadata``.

Integrity: the same metadata is also embedded in the safetensors header, so **the SHA-256 of the
``.safetensors`` file, which :func:`save_checkpoint` returns and the database records, covers
tensors and metadata together**. The JSON file is a readable copy that additionally records
``safetensors_sha256``; :func:`load_checkpoint` hashes the bytes before parsing them, then requires
the JSON copy to equal the embedded one and its recorded hash to equal the file's, so an edited
JSON file is detected even without an expected hash.

Half precision: a shipped version may store its parameters as float16 (:mod:`sumo_cli.nets.half`;
``tensors`` then lists them as ``float16`` and ``stored_dtype`` says so); :func:`load_checkpoint`
checks the stored bytes as they are and returns every float16 tensor upcast to float32.

Both files are written atomically (temporary file in the same folder, fsync, ``os.replace``), the
tensors first; a crash between the two leaves a pair that :func:`load_checkpoint` rejects.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import tempfile
from dataclasses import dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

import sumo_cli
from sumo_cli.errors import UserError
from sumo_cli.nets.policy import PolicySpec, check_params, param_shapes

FORMAT = "sumo-checkpoint"
FORMAT_VERSION = 1
EMBED_KEY = "sumo_metadata"
NORM_PREFIX = "obs_norm/"
META_PREFIX = "meta/"
RESERVED = (
    "format",
    "format_version",
    "spec",
    "body",
    "strategy",
    "code_version",
    "torch_version",
    "mujoco_version",
    "tensors",
    "safetensors_sha256",
)


def checkpoint_paths(path: str | Path) -> tuple[Path, Path]:
    """``(tensors_path, json_path)`` for a checkpoint given as ``<base>`` or ``<base>.safetensors``."""
    p = Path(path)
    base = p.name[: -len(".safetensors")] if p.name.endswith(".safetensors") else p.name
    return p.with_name(base + ".safetensors"), p.with_name(base + ".json")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


def _dtype_name(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")


def _mujoco_version() -> str | None:
    try:
        return importlib_metadata.version("mujoco")
    except importlib_metadata.PackageNotFoundError:
        return None


def checkpoint_tensors(
    params: dict[str, torch.Tensor],
    obs_stats: dict[str, Any],
    extra: dict[str, torch.Tensor] | None = None,
) -> dict[str, torch.Tensor]:
    """Assemble the tensor dict of a checkpoint: parameters as they are, the normaliser statistics
    under ``obs_norm/``, and ``extra`` (e.g. ``{"meta/alpha_0": ...}``) as it is."""
    out = dict(params)
    for k in ("sum", "sumsq", "count"):
        out[NORM_PREFIX + k] = torch.as_tensor(obs_stats[k])
    for k, v in (extra or {}).items():
        if k in out:
            raise ValueError(f"tensor {k!r} given twice")
        out[k] = v
    return out


def _check_content(spec: PolicySpec, tensors: dict[str, torch.Tensor]) -> None:
    """Raise ValueError unless ``tensors`` holds the parameters of ``spec`` (one agent) and
    normaliser statistics of the observation size."""
    params = {k: tensors[k] for k in param_shapes(spec) if k in tensors}
    agent = check_params(spec, params)
    if agent:
        raise ValueError(f"a checkpoint holds one agent; the parameters have leading agent shape {agent}")
    want = {"sum": (spec.obs_dim,), "sumsq": (spec.obs_dim,), "count": ()}
    for k, shape in want.items():
        t = tensors.get(NORM_PREFIX + k)
        if t is None:
            raise ValueError(f"observation-normaliser statistic {NORM_PREFIX + k!r} is missing")
        if tuple(t.shape) != shape:
            raise ValueError(f"{NORM_PREFIX + k!r} has shape {tuple(t.shape)}, expected {shape}")


def save_checkpoint(
    path: str | Path,
    tensors: dict[str, torch.Tensor],
    spec: PolicySpec,
    *,
    body: str | None = None,
    strategy: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> str:
    """Write ``<base>.safetensors`` and ``<base>.json`` atomically; return the SHA-256 (hex) of the
    ``.safetensors`` file, which covers the metadata as well (see the module docstring).

    ``tensors`` must hold the parameters of ``spec`` and the ``obs_norm/*`` statistics (see
    :func:`checkpoint_tensors`); ``metadata`` keys are added at the top level of the metadata and
    must be JSON-serialisable and not collide with the reserved keys. Raises ValueError on bad
    arguments."""
    for k, v in tensors.items():
        if not isinstance(k, str) or not isinstance(v, torch.Tensor):
            raise ValueError(f"checkpoint tensors must map str to torch.Tensor, got {k!r}: {type(v).__name__}")
    _check_content(spec, tensors)
    extra = dict(metadata or {})
    clash = sorted(set(extra) & set(RESERVED))
    if clash:
        raise ValueError(f"metadata keys {clash} are reserved")
    clean = {k: v.detach().to("cpu").clone(memory_format=torch.contiguous_format) for k, v in sorted(tensors.items())}
    meta: dict[str, Any] = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "spec": spec.to_dict(),
        "body": body,
        "strategy": strategy,
        "code_version": sumo_cli.__version__,
        "torch_version": torch.__version__,
        "mujoco_version": _mujoco_version(),
        "tensors": {k: {"dtype": _dtype_name(v), "shape": list(v.shape)} for k, v in clean.items()},
        **extra,
    }
    try:
        embedded = json.dumps(meta, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"checkpoint metadata is not JSON-serialisable: {exc}") from exc
    data = st_save(clean, metadata={EMBED_KEY: embedded})
    digest = sha256_bytes(data)
    readable = json.dumps({**meta, "safetensors_sha256": digest}, indent=2, sort_keys=True) + "\n"
    st_path, json_path = checkpoint_paths(path)
    st_path.parent.mkdir(parents=True, exist_ok=True)
    _atomic_write(st_path, data)
    _atomic_write(json_path, readable.encode("utf-8"))
    return digest


@dataclass
class Checkpoint:
    path: Path
    spec: PolicySpec
    tensors: dict[str, torch.Tensor]
    metadata: dict[str, Any]
    sha256: str

    @property
    def params(self) -> dict[str, torch.Tensor]:
        """The policy/value parameter dict of :mod:`sumo_cli.nets.policy`."""
        return {k: self.tensors[k] for k in param_shapes(self.spec)}

    @property
    def obs_stats(self) -> dict[str, torch.Tensor]:
        """``{"sum", "sumsq", "count"}`` for :mod:`sumo_cli.nets.normalizer`."""
        return {k: self.tensors[NORM_PREFIX + k] for k in ("sum", "sumsq", "count")}

    @property
    def meta_params(self) -> dict[str, torch.Tensor]:
        """Tensors under ``meta/`` (e.g. learned step sizes ``meta/alpha_0``)."""
        return {k: v for k, v in self.tensors.items() if k.startswith(META_PREFIX)}


def _embedded_metadata(data: bytes) -> dict[str, Any]:
    """Read the ``__metadata__`` of a safetensors blob (8-byte little-endian header length, then
    the JSON header)."""
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError("header length exceeds the file size")
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    return json.loads(header["__metadata__"][EMBED_KEY])


def load_checkpoint(path: str | Path, expected_sha256: str | None) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint`. ``expected_sha256`` (the digest that
    ``save_checkpoint`` returned; None skips this check deliberately) is compared with the hash of
    the file's bytes before anything is parsed. Every failure - missing file, hash mismatch,
    unparsable content, metadata that does not match the tensors or the JSON copy - raises
    UserError with one sentence."""
    st_path, json_path = checkpoint_paths(path)
    if not st_path.is_file():
        raise UserError(f"checkpoint {st_path} does not exist")
    if not json_path.is_file():
        raise UserError(f"checkpoint {st_path} has no metadata file {json_path.name} beside it")
    data = st_path.read_bytes()
    digest = sha256_bytes(data)
    if expected_sha256 is not None and digest != expected_sha256.lower():
        raise UserError(
            f"checkpoint {st_path} is corrupt or was modified: SHA-256 {digest}, expected {expected_sha256}"
        )
    try:
        tensors = st_load(data)
        embedded = _embedded_metadata(data)
    except Exception as exc:
        raise UserError(f"checkpoint {st_path} is not a readable sumo checkpoint ({exc})") from exc
    try:
        readable = json.loads(json_path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"checkpoint metadata {json_path} is not valid JSON ({exc})") from exc
    if not isinstance(readable, dict) or readable.get("safetensors_sha256") != digest:
        raise UserError(
            f"checkpoint metadata {json_path} records SHA-256 "
            f"{readable.get('safetensors_sha256') if isinstance(readable, dict) else None}, "
            f"but {st_path.name} has {digest}: one of the two files was modified or replaced"
        )
    readable = {k: v for k, v in readable.items() if k != "safetensors_sha256"}
    if readable != embedded:
        changed = sorted(k for k in set(readable) | set(embedded) if readable.get(k) != embedded.get(k))
        raise UserError(
            f"checkpoint metadata {json_path} differs from the copy stored in {st_path.name} "
            f"(keys {changed}): the JSON file was modified"
        )
    if embedded.get("format") != FORMAT or embedded.get("format_version") != FORMAT_VERSION:
        raise UserError(
            f"checkpoint {st_path} has format {embedded.get('format')!r} version "
            f"{embedded.get('format_version')!r}; this code reads {FORMAT!r} version {FORMAT_VERSION}"
        )
    listed = embedded.get("tensors", {})
    actual = {k: {"dtype": _dtype_name(v), "shape": list(v.shape)} for k, v in tensors.items()}
    if listed != actual:
        diff = sorted(k for k in set(listed) | set(actual) if listed.get(k) != actual.get(k))
        raise UserError(f"checkpoint {st_path}: its metadata does not match its tensors (tensors {diff})")
    try:
        spec = PolicySpec.from_dict(embedded["spec"])
        _check_content(spec, tensors)
    except (KeyError, TypeError, ValueError) as exc:
        raise UserError(f"checkpoint {st_path}: its tensors do not fit its policy spec ({exc})") from exc
    # half-precision shipping (sumo_cli/nets/half.py): float16 as stored, float32 for playing
    tensors = {k: v.float() if v.dtype == torch.float16 else v for k, v in tensors.items()}
    return Checkpoint(path=st_path, spec=spec, tensors=tensors, metadata=embedded, sha256=digest)
