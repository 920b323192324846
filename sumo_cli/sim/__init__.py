"""The RoboSumo simulation (numpy and MuJoCo).

MuJoCo's bindings are imported here first, with OpenGL disabled unless the user set ``MUJOCO_GL``:
with it unset, ``import mujoco`` loads GLFW, whose library search starts Python child processes at
import time (about 0.1 s, in every worker too), and a worker ended while they run leaves their
tracebacks on the terminal. Nothing renders before :func:`sumo_cli.sim.render.gl_backend` chooses
and installs a backend itself, so ``MUJOCO_GL`` is left as it was.
"""

import os as _os

if "MUJOCO_GL" in _os.environ:
    import mujoco  # noqa: F401
else:
    _os.environ["MUJOCO_GL"] = "disable"
    try:
        import mujoco  # noqa: F401
    finally:
        del _os.environ["MUJOCO_GL"]
