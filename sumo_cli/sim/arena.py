"""The RoboSumo scene: a square tatami on a floor, four border cylinders, two agents.

``build_model(body_a, body_b, physics)`` returns a compiled ``mujoco.MjModel`` for any pair of bodies
(the same body on both sides included). Agent A's names are prefixed ``agent0/``, B's ``agent1/``.

Physics modes:
- ``"faithful"``: RK4, timestep 0.01 s, as in the reference environment.
- ``"fast"``: the implicitfast integrator, everything else identical (same 0.01 s timestep; the
  environment still takes 5 physics steps per env step).

Collision bits: the arena geoms have contype=conaffinity=1; agent A's geoms contype=2, agent B's
contype=4, both conaffinity=1|2|4. So each agent touches the arena, the opponent and itself, as in
the reference, where every geom collides with every other. MuJoCo's own filter keeps the overlaps
that the bodies have by construction out of it: geoms of bodies welded together (the torso and the
rigid leg segments, which start at the torso centre) or in a parent-child pair (segment and the
next segment of a leg) never collide. What remains is leg against leg: the Spider's two front legs
(30 degrees apart, hips +-20) touch, and so do a Bug's corner and middle legs.
"""

from __future__ import annotations

from functools import lru_cache

import mujoco

from sumo_cli.vocabulary import PHYSICS, START_RADIUS  # noqa: F401 - START_RADIUS is part of this geometry

from .bodies import BodySpec, agent_xml, body_spec

TIMESTEP = 0.01
FRAME_SKIP = 5
SURFACE_Z = 0.5          # top of the tatami (world z); agents observe z - SURFACE_Z
TATAMI_HALF = (2.3, 2.3, 0.25)
BORDER = 2.0             # the painted border cylinders lie along x = ±2 and y = ±2
BORDER_RADIUS = 0.03
RING_OUT = 2.1           # max-norm of torso (x, y) at which an agent is out
FALL_Z = 0.29            # relative torso z under which an agent has fallen
START_HEIGHT = 1.25      # world z of the torsos at reset
ARENA_FRICTION = (1.0, 0.1, 0.1)

PHYSICS_MODES = PHYSICS
AGENT_PREFIXES = ("agent0/", "agent1/")
_AGENT_COLORS = ("0.85 0.3 0.25 1", "0.25 0.45 0.85 1")


def _integrator(physics: str) -> str:
    if physics == "faithful":
        return "RK4"
    if physics == "fast":
        return "implicitfast"
    raise ValueError(f"unknown physics mode {physics!r}; expected one of {PHYSICS_MODES}")


def scene_xml(body_a: str | BodySpec, body_b: str | BodySpec, physics: str = "faithful") -> str:
    """The MJCF text of the whole scene."""
    spec_a = body_a if isinstance(body_a, BodySpec) else body_spec(body_a)
    spec_b = body_b if isinstance(body_b, BodySpec) else body_spec(body_b)
    integrator = _integrator(physics)
    fr = " ".join(f"{v:g}" for v in ARENA_FRICTION)
    hx, hy, hz = TATAMI_HALF
    b, z = BORDER, SURFACE_Z
    borders = [
        (f"{b} {-b} {z} {b} {b} {z}", "border_xp"),
        (f"{-b} {-b} {z} {-b} {b} {z}", "border_xn"),
        (f"{-b} {b} {z} {b} {b} {z}", "border_yp"),
        (f"{-b} {-b} {z} {b} {-b} {z}", "border_yn"),
    ]
    border_xml = "\n".join(
        f'<geom name="{name}" type="cylinder" fromto="{ft}" size="{BORDER_RADIUS:g}" '
        f'contype="1" conaffinity="1" rgba="0.8 0.1 0.1 1"/>'
        for ft, name in borders
    )
    # Start poses along x; reset() moves them to the sampled angle anyway.
    agent_a, act_a = agent_xml(spec_a, AGENT_PREFIXES[0], (-START_RADIUS, 0.0, START_HEIGHT),
                               contype=2, conaffinity=1 | 2 | 4, rgba=_AGENT_COLORS[0])
    agent_b, act_b = agent_xml(spec_b, AGENT_PREFIXES[1], (START_RADIUS, 0.0, START_HEIGHT),
                               contype=4, conaffinity=1 | 2 | 4, rgba=_AGENT_COLORS[1])
    return f"""<mujoco model="robosumo_{spec_a.name}_vs_{spec_b.name}">
<compiler angle="degree" inertiafromgeom="true" autolimits="true"/>
<option timestep="{TIMESTEP:g}" integrator="{integrator}" jacobian="dense"/>
<default>
  <joint limited="true" armature="1" damping="1"/>
</default>
<visual>
  <headlight ambient="0.4 0.4 0.4" diffuse="0.6 0.6 0.6"/>
  <global offwidth="1280" offheight="720"/>
</visual>
<asset>
  <texture name="floor_tex" type="2d" builtin="checker" rgb1="0.25 0.3 0.35" rgb2="0.3 0.35 0.4"
           width="256" height="256"/>
  <material name="floor_mat" texture="floor_tex" texrepeat="8 8"/>
</asset>
<worldbody>
<light name="sun" pos="0 0 6" dir="0 0 -1" directional="true"/>
<camera name="overview" pos="0 -6.5 5.5" xyaxes="1 0 0 0 0.65 0.76"/>
<geom name="floor" type="plane" pos="0 0 -0.025" size="12 12 0.1" material="floor_mat"
      friction="{fr}" contype="1" conaffinity="1"/>
<geom name="tatami" type="box" pos="0 0 {hz:g}" size="{hx:g} {hy:g} {hz:g}" friction="{fr}"
      contype="1" conaffinity="1" rgba="0.85 0.8 0.6 1"/>
{border_xml}
{agent_a}
{agent_b}
</worldbody>
<actuator>
{act_a}
{act_b}
</actuator>
</mujoco>
"""


@lru_cache(maxsize=32)
def _compiled(name_a: str, name_b: str, physics: str) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(scene_xml(name_a, name_b, physics))


def build_model(body_a: str, body_b: str, physics: str = "faithful") -> mujoco.MjModel:
    """A fresh compiled model of body_a (agent0/) against body_b (agent1/).

    Each call returns its own copy, so callers may modify options without affecting others.
    """
    model = _compiled(body_spec(body_a).name, body_spec(body_b).name, physics)
    out = _copy_model(model)
    assert out.opt.jacobian == mujoco.mjtJacobian.mjJAC_DENSE
    return out


def _copy_model(model: mujoco.MjModel) -> mujoco.MjModel:
    import copy

    return copy.copy(model)
