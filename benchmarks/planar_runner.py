"""A planar two-legged runner for the half-cheetah task of the MAML literature (Finn et al. 2017,
Sec. 5.3: "half-cheetah, forward/backward"), written for this project.

The body moves in the x-z plane: a horizontal capsule torso with a head, a back and a front leg of
three hinged segments each (hip, knee, ankle), six torque motors. Root degrees of freedom: slide
along x, slide along z, hinge about y, so it cannot fall over sideways and learns to run far sooner
than the Ant. Sizes, joint ranges and motor gears are of the same order as the gym/rllab half-cheetah
(torso 1 m, legs about 0.6-0.7 m, gears 30-120, 0.05 s env step) so that returns are on a comparable
scale; the model itself is this project's.

Observation: every coordinate but the root's x position (the task is translation-invariant) and
every velocity: 8 + 9 = 17 numbers.
"""

from __future__ import annotations

import mujoco
import numpy as np

TIMESTEP = 0.01
FRAME_SKIP = 5  # env step 0.05 s, as the half-cheetah of rllab/gym
DT = TIMESTEP * FRAME_SKIP
START_Z = 0.7
QPOS_NOISE = 0.1
QVEL_NOISE = 0.1

# (name, parent attachment in the torso frame, segments: (joint range in degrees, motor gear, segment vector, radius))
_LEGS = {
    "back": ((-0.5, 0.0), [((-30, 60), 120, (-0.15, -0.27), 0.046),
                            ((-45, 45), 90, (0.14, -0.26), 0.046),
                            ((-25, 45), 60, (0.05, -0.18), 0.046)]),
    "front": ((0.5, 0.0), [((-55, 40), 120, (0.12, -0.24), 0.046),
                            ((-70, 50), 60, (-0.14, -0.22), 0.046),
                            ((-30, 30), 30, (0.06, -0.13), 0.046)]),
}


def _leg_xml(name: str, origin, segments) -> tuple[str, list[str]]:
    """Nested bodies of one leg (hip, knee, ankle) and its motor lines."""
    opened, motors = [], []
    pos = (*origin,)
    for i, ((lo, hi), gear, (dx, dz), r) in enumerate(segments):
        seg = f"{name}{i}"
        opened.append(
            f'<body name="{seg}" pos="{pos[0]:g} 0 {pos[1]:g}">'
            f'<joint name="{seg}" type="hinge" axis="0 1 0" range="{lo} {hi}" stiffness="{180 - 60 * i}" damping="{6 - 1.5 * i:g}" armature="0.1"/>'
            f'<geom type="capsule" fromto="0 0 0 {dx:g} 0 {dz:g}" size="{r:g}"/>'
        )
        motors.append(f'<motor joint="{seg}" gear="{gear}" ctrlrange="-1 1" ctrllimited="true"/>')
        pos = (dx, dz)
    return "".join(opened) + "</body>" * len(segments), motors


def scene_xml(physics: str = "fast") -> str:
    integrator = {"fast": "implicitfast", "faithful": "RK4"}[physics]
    legs, motors = zip(*(_leg_xml(n, o, s) for n, (o, s) in _LEGS.items()))
    return f"""<mujoco model="planar-runner">
  <compiler angle="degree"/>
  <option timestep="{TIMESTEP}" integrator="{integrator}"/>
  <default><geom friction="0.4 0.1 0.1" density="1000" condim="3" rgba="0.7 0.6 0.4 1"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="200 4 0.1" friction="0.8 0.1 0.1" rgba="0.3 0.35 0.3 1"/>
    <body name="torso" pos="0 0 {START_Z}">
      <joint name="rootx" type="slide" axis="1 0 0" armature="0" damping="0" limited="false"/>
      <joint name="rootz" type="slide" axis="0 0 1" armature="0" damping="0" limited="false"/>
      <joint name="rooty" type="hinge" axis="0 1 0" armature="0" damping="0" limited="false"/>
      <geom name="torso" type="capsule" fromto="-0.5 0 0 0.5 0 0" size="0.046"/>
      <geom name="head" type="capsule" fromto="0.5 0 0 0.68 0 0.15" size="0.046"/>
      {"".join(legs)}
    </body>
  </worldbody>
  <actuator>{"".join(m for ms in motors for m in ms)}</actuator>
</mujoco>"""


def build_model(physics: str = "fast") -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(scene_xml(physics))


def reset_pose(model: mujoco.MjModel, data: mujoco.MjData, rng: np.random.Generator) -> None:
    """Joints and root ``U(-QPOS_NOISE, QPOS_NOISE)`` around the model's pose, velocities
    ``N(0, QVEL_NOISE^2)``."""
    mujoco.mj_resetData(model, data)
    data.qpos[:] = model.qpos0 + rng.uniform(-QPOS_NOISE, QPOS_NOISE, model.nq)
    data.qvel[:] = rng.normal(0.0, QVEL_NOISE, model.nv)
    mujoco.mj_forward(model, data)
