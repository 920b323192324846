"""Half-precision copies of checkpoints, for shipping many versions of an agent compactly.

:func:`save_half` reads a checkpoint (its SHA-256 checked), stores the policy/value parameters as
float16 and writes a new checkpoint pair with :func:`~sumo_cli.nets.checkpoint.save_checkpoint`:
the normaliser statistics and any other tensor (``meta/`` step sizes, counters) keep their dtype,
since they are small and a float16 sum of squares would overflow. The metadata says
``stored_dtype: "float16"`` and records the SHA-256 of the full-precision source; ``tensors`` lists
each tensor's stored dtype. :func:`~sumo_cli.nets.checkpoint.load_checkpoint` checks the float16
file's hash like any other and returns the parameters upcast to float32.

A Bug LSTM version of 364 KB becomes 187 KB with its JSON (Ant 175 KB, Spider 200 KB: 100 versions of
each body about 56 MB). The upcast policy's mean actions differ from the full-precision one's by at
most 4.8e-4 on the shipped LSTMs over 200 steps of 16 sequences (float16 keeps 11 significant bits);
the tests allow :data:`ACTION_TOL`.
"""

from __future__ import annotations

from pathlib import Path

import torch

from sumo_cli.nets.checkpoint import RESERVED, load_checkpoint, save_checkpoint
from sumo_cli.nets.policy import param_shapes

STORED_DTYPE = "float16"
#: The largest difference in mean action (before the Gaussian's noise) the tests allow between a
#: policy and its float16 copy, on normalised observations.
ACTION_TOL = 1e-2


def save_half(src: str | Path, src_sha256: str, dst: str | Path, metadata: dict | None = None) -> str:
    """Write a float16 copy of checkpoint ``src`` to ``dst`` and return its SHA-256. ``metadata``
    is added to (and overrides) the source's caller metadata. Raises UserError when ``src`` is
    missing or does not match ``src_sha256``."""
    ck = load_checkpoint(src, src_sha256)
    names = set(param_shapes(ck.spec))
    tensors = {k: v.to(torch.float16) if k in names and v.is_floating_point() else v for k, v in ck.tensors.items()}
    extra = {k: v for k, v in ck.metadata.items() if k not in RESERVED}
    extra.update(metadata or {})
    extra.update({"stored_dtype": STORED_DTYPE, "full_precision_sha256": ck.sha256})
    return save_checkpoint(dst, tensors, ck.spec, body=ck.metadata.get("body"), strategy=ck.metadata.get("strategy"),
                           metadata=extra)
