"""The words and reference values a user's options are checked against, importable without torch
or MuJoCo (so that bad input is answered at once): the observation feature sets, the physics modes
and the reference start radius. The modules that use them (nets.features, sim.arena) take them
from here."""

from __future__ import annotations

from sumo_cli.errors import UserError

#: Observation features a policy adds to the original observation (nets.features).
FEATURES_NONE = "none"
FEATURES_EGO = "ego"
FEATURES_EGO_PAST = "ego-past"
FEATURES = (FEATURES_NONE, FEATURES_EGO, FEATURES_EGO_PAST)

#: The physics a game or a training run steps with: RK4 as the original, or MuJoCo's implicitfast.
PHYSICS = ("faithful", "fast")


def check_physics(physics: str) -> None:
    """Refuse a physics mode that is not one of :data:`PHYSICS` (the ``--physics`` of every command)."""
    if physics not in PHYSICS:
        raise UserError(f"--physics must be {' or '.join(PHYSICS)}, got {physics!r}")

#: How far from the centre each agent starts in the reference environment (m).
START_RADIUS = 1.15
