"""Importer for the original RoboSumo policy zoo (18 flat float32 ``.npy`` files).

Layout of each file (D = observation size, A = action size, H = 64), in order:
return filter (sum, sumsq, count), observation filter (sum (D), sumsq (D), count), value network,
policy network, logstd (A). The networks are stored layer by layer, weight ``(in x out)`` then bias,
which is exactly the order of :func:`sumo_cli.nets.policy.param_shapes` (value net, policy net,
logstd), so parsing is a walk over that list.

The files are test data brought by the user (never shipped): :func:`find_zoo_files` locates them in
a copy of the archived repository or in a flat folder.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import torch

from sumo_cli.errors import UserError
from sumo_cli.nets.policy import Params, PolicySpec, param_shapes

BODIES: dict[str, tuple[int, int]] = {"ant": (120, 8), "bug": (164, 12), "spider": (208, 16)}
ZOO_ARCHS = ("mlp", "lstm")
HIDDEN = 64
REPO_SUBDIR = Path("robosumo") / "policy_zoo" / "assets"
_FLAT_NAME = re.compile(r"^(ant|bug|spider)-(mlp|lstm)-v(\d+)\.npy$")
_REPO_NAME = re.compile(r"^agent-params-v(\d+)\.npy$")


def zoo_spec(body: str, arch: str) -> PolicySpec:
    if body not in BODIES:
        raise UserError(f"unknown body {body!r}; the zoo has {', '.join(BODIES)}")
    if arch not in ZOO_ARCHS:
        raise UserError(f"unknown zoo architecture {arch!r}; the zoo has {', '.join(ZOO_ARCHS)}")
    obs_dim, act_dim = BODIES[body]
    return PolicySpec(arch=arch, obs_dim=obs_dim, act_dim=act_dim, hidden=HIDDEN)


def expected_size(body: str, arch: str) -> int:
    """Number of floats in a zoo file (e.g. ant mlp 24,645; spider lstm 94,341)."""
    spec = zoo_spec(body, arch)
    filters = 3 + 2 * spec.obs_dim + 1
    return filters + sum(math.prod(s) for s in param_shapes(spec).values())


def _infer(size: int) -> tuple[str, str] | None:
    for body in BODIES:
        for arch in ZOO_ARCHS:
            if expected_size(body, arch) == size:
                return body, arch
    return None


def load_zoo_file(
    path: str | Path, body: str | None = None, arch: str | None = None
) -> tuple[PolicySpec, Params, dict[str, torch.Tensor], dict]:
    """Parse one zoo file. ``body``/``arch`` default to the ones the file's size implies (the six
    sizes are distinct); when given, the size must match them.

    Returns ``(spec, params, obs_stats, metadata)``: ``params`` float32 in the layout of
    :mod:`sumo_cli.nets.policy`; ``obs_stats`` ``{"sum", "sumsq", "count"}`` in float64 (exact
    conversion of the stored float32) for :mod:`sumo_cli.nets.normalizer`; ``metadata`` has
    ``source``, ``file``, ``body``, ``arch``, ``version`` (from the file name, or None) and
    ``return_filter`` (sum, sumsq, count as floats; it only un-normalises the value head).
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"zoo policy file {path} does not exist")
    try:
        flat = np.load(path, allow_pickle=False)
    except Exception as exc:  # ValueError, OSError, EOFError, ...
        raise UserError(f"zoo policy file {path} is not a readable .npy array ({exc})") from exc
    if flat.ndim != 1 or flat.dtype != np.float32:
        raise UserError(
            f"zoo policy file {path} should hold a flat float32 array, found dtype {flat.dtype} shape {flat.shape}"
        )
    size = int(flat.shape[0])
    if body is None or arch is None:
        guess = _infer(size)
        if guess is None:
            sizes = ", ".join(f"{b} {a} {expected_size(b, a)}" for b in BODIES for a in ZOO_ARCHS)
            raise UserError(f"zoo policy file {path} has {size} floats, which matches no zoo policy ({sizes})")
        body = body or guess[0]
        arch = arch or guess[1]
    want = expected_size(body, arch)
    if size != want:
        raise UserError(f"zoo policy file {path} has {size} floats, expected {want} for a {body} {arch} policy")
    if not np.all(np.isfinite(flat)):
        raise UserError(f"zoo policy file {path} contains non-finite values")

    spec = zoo_spec(body, arch)
    D = spec.obs_dim
    pos = 0

    def take(n: int) -> np.ndarray:
        nonlocal pos
        out = flat[pos : pos + n]
        pos += n
        return out

    ret = take(3)
    obs_stats = {
        "sum": torch.from_numpy(take(D).astype(np.float64)),
        "sumsq": torch.from_numpy(take(D).astype(np.float64)),
        "count": torch.tensor(float(take(1)[0]), dtype=torch.float64),
    }
    params: Params = {}
    for key, shape in param_shapes(spec).items():
        params[key] = torch.from_numpy(take(math.prod(shape)).reshape(shape).copy())
    assert pos == size

    m = _FLAT_NAME.match(path.name) or _REPO_NAME.match(path.name)
    version = int(m.groups()[-1]) if m else None
    metadata = {
        "source": "robosumo-zoo",
        "file": str(path),
        "body": body,
        "arch": arch,
        "version": version,
        "return_filter": {"sum": float(ret[0]), "sumsq": float(ret[1]), "count": float(ret[2])},
    }
    return spec, params, obs_stats, metadata


def find_zoo_files(path: str | Path) -> list[tuple[str, str, int, Path]]:
    """Locate zoo files under ``path``: a copy of the archived repository (files at
    ``robosumo/policy_zoo/assets/<body>/<arch>/agent-params-v<k>.npy``; ``path`` may also be that
    ``assets`` folder itself) or a folder of files named ``<body>-<arch>-v<k>.npy``. Returns ``(body, arch, version, path)`` sorted by body,
    arch, version. Raises UserError if ``path`` is missing or holds no zoo file."""
    root = Path(path)
    if not root.is_dir():
        raise UserError(f"zoo folder {root} does not exist or is not a folder")
    found: dict[tuple[str, str, int], Path] = {}
    for assets in (root / REPO_SUBDIR, root):
        for body in BODIES:
            for arch in ZOO_ARCHS:
                folder = assets / body / arch
                if not folder.is_dir():
                    continue
                for f in folder.iterdir():
                    m = _REPO_NAME.match(f.name)
                    if m and f.is_file():
                        found.setdefault((body, arch, int(m.group(1))), f)
    for f in root.iterdir():
        m = _FLAT_NAME.match(f.name)
        if m and f.is_file():
            found.setdefault((m.group(1), m.group(2), int(m.group(3))), f)
    if not found:
        raise UserError(
            f"no zoo policies found in {root}: expected a copy of the robosumo repository "
            f"({REPO_SUBDIR}/<body>/<arch>/agent-params-v<k>.npy) or files named <body>-<arch>-v<k>.npy"
        )
    body_order = list(BODIES)
    keys = sorted(found, key=lambda k: (body_order.index(k[0]), ZOO_ARCHS.index(k[1]), k[2]))
    return [(b, a, v, found[(b, a, v)]) for b, a, v in keys]
