"""Headless pictures of RoboSumo bouts: frames, PNG stills and MP4 videos (numpy + mujoco only).

OpenGL backend. MuJoCo picks its GL backend from ``MUJOCO_GL`` when ``mujoco`` is first imported,
which in this package happens long before anyone asks for a picture. :func:`gl_backend` therefore
chooses the backend itself the first time a frame is needed: ``MUJOCO_GL`` when it is set (nothing
is guessed then), otherwise ``egl`` when the machine has a GPU (``/dev/nvidia*`` or a DRI render
node) and ``osmesa`` (Debian's libosmesa6, software rendering) when it does not, each tried in a
short child process so that a backend that cannot work (or crashes) rules itself out without
touching this process. The choice is written to ``MUJOCO_GL`` (inherited by worker processes) and
installed as the class ``mujoco.Renderer`` creates its context with. No GL context exists before
the first :class:`BoutRenderer`, so this happens "before mujoco's GL is initialised". When no
backend works, a :class:`~sumo_cli.errors.UserError` says so in one sentence.

Picture. A free camera looks down at 50 degrees on the tatami's centre from the -y side, far enough
for the whole tatami (and an agent falling off its edge) to be in view at any aspect ratio; the
lighting is toned down from the scene's defaults (which wash out the tatami) and the sun gets a
slight angle so that shadows fall beside the agents. Agent A keeps the scene's red, agent B its
blue, the border its dark red. Only a private copy of the model is changed, never the physics.

Cost (2 shared CPU cores, osmesa, 480x360): about 0.1 s a frame without shadows, 0.35 s with them,
so shadows are on by default only with a GPU (see :func:`default_shadows`).
Every renderer is closed explicitly (a context manager); MuJoCo's own ``__del__`` is only a backstop.

MP4s are written with imageio-ffmpeg (the optional ``video`` dependencies: libx264, yuv420p, even
frame sizes); PNGs with zlib, no imaging library needed.
"""

from __future__ import annotations

import copy
import glob
import os
import struct
import subprocess
import sys
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

import mujoco
import numpy as np

from sumo_cli.errors import UserError

from .arena import AGENT_PREFIXES, SURFACE_Z

DEFAULT_WIDTH = 480
DEFAULT_HEIGHT = 360
DEFAULT_FPS = 20          # one frame per env step (0.05 s of simulated time) plays in real time
HEADLESS_BACKENDS = ("egl", "osmesa")
_DISABLED = ("disable", "disabled", "off", "false", "0")

_backend: str | None = None   # chosen and installed in this process

_PROBE = (
    "import mujoco\n"
    "r = mujoco.Renderer(mujoco.MjModel.from_xml_string('<mujoco/>'), 8, 8)\n"
    "r.render()\n"
    "r.close()\n"
)


# ---------------------------------------------------------------------- GL backend
def _has_gpu() -> bool:
    return bool(glob.glob("/dev/nvidia[0-9]*") or glob.glob("/dev/dri/renderD*"))


def auto_candidates() -> list[str]:
    """The backends tried, in order, when MUJOCO_GL is unset."""
    order = ["egl", "osmesa"] if _has_gpu() else ["osmesa", "egl"]
    if os.environ.get("DISPLAY"):
        order.append("glfw")
    return order


def _probe(backend: str) -> str | None:
    """None when a child process can render one frame with this backend, else why it could not."""
    env = {**os.environ, "MUJOCO_GL": backend}
    if backend in HEADLESS_BACKENDS:
        env["PYOPENGL_PLATFORM"] = backend
    try:
        proc = subprocess.run([sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True,
                              timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if proc.returncode == 0:
        return None
    lines = [ln.strip() for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {proc.returncode}"


def _platform_clash(backend: str) -> str | None:
    """Why PyOpenGL's platform, when the user set it, rules this backend out (None if it does not)."""
    platform = os.environ.get("PYOPENGL_PLATFORM", "").strip().lower()
    if backend in HEADLESS_BACKENDS and platform and platform != backend:
        return f"needs PYOPENGL_PLATFORM={backend} (or unset), but it is {platform}"
    return None


def _install(backend: str) -> None:
    """Make mujoco.Renderer create its contexts with this backend, whatever MUJOCO_GL was when
    mujoco was imported."""
    clash = _platform_clash(backend)
    if clash:
        raise UserError(f"MUJOCO_GL={backend} {clash}")
    os.environ["MUJOCO_GL"] = backend
    if backend in HEADLESS_BACKENDS:
        os.environ["PYOPENGL_PLATFORM"] = backend
    try:
        from mujoco.rendering.classic import gl_context
    except ImportError:  # pragma: no cover - older layouts of the bindings
        from mujoco import gl_context  # type: ignore[no-redef]
    try:
        if backend == "egl":
            from mujoco.egl import GLContext
        elif backend == "osmesa":
            from mujoco.osmesa import GLContext
        elif backend in ("glfw", "glx", "enable", "enabled", "on", "true", "1", ""):
            from mujoco.glfw import GLContext
        else:
            raise UserError(f"MUJOCO_GL={backend} is not a backend MuJoCo knows; use osmesa or egl")
    except UserError:
        raise
    except Exception as exc:  # ImportError, OSError of a missing library, PyOpenGL's own errors
        raise UserError(_no_gl_message({backend: f"{type(exc).__name__}: {exc}"})) from None
    gl_context.GLContext = GLContext


def _no_gl_message(reasons: dict[str, str]) -> str:
    tried = "; ".join(f"{name}: {why}" for name, why in reasons.items())
    return (f"no OpenGL backend for headless rendering works on this machine ({tried}); install "
            f"Debian's libosmesa6 (apt-get install -y libosmesa6) for CPU rendering or run where a GPU "
            f"offers EGL, or set MUJOCO_GL to a backend that works")


def gl_backend() -> str:
    """The GL backend frames are rendered with, chosen (see the module notes) and installed on the
    first call. Raises UserError, in one sentence, when none works."""
    global _backend
    if _backend is not None:
        return _backend
    requested = os.environ.get("MUJOCO_GL", "").strip().lower()
    if requested in _DISABLED:
        raise UserError(f"rendering is off because MUJOCO_GL={requested}; unset it or set it to osmesa or egl")
    if requested:
        _install(requested)     # the user's choice: no probing, failures surface on first use
        _backend = requested
        return _backend
    reasons = {}
    for candidate in auto_candidates():
        why = _platform_clash(candidate) or _probe(candidate)
        if why is None:
            _install(candidate)
            _backend = candidate
            return _backend
        reasons[candidate] = why
    raise UserError(_no_gl_message(reasons))


def default_shadows(backend: str | None = None) -> bool:
    """Whether frames get shadows by default: yes on a GPU, no in software rendering (osmesa)."""
    return (backend or gl_backend()) != "osmesa"


def gl_available() -> tuple[bool, str]:
    """(True, backend) when frames can be rendered here, else (False, the reason)."""
    try:
        return True, gl_backend()
    except UserError as exc:
        return False, str(exc)


# ---------------------------------------------------------------------- camera and renderer
@dataclass(frozen=True)
class CameraView:
    """A free camera aimed at ``lookat``; ``distance`` is for a 4:3 frame and grows for narrower
    ones so that the tatami stays in view."""

    lookat: tuple[float, float, float] = (0.0, -0.15, SURFACE_Z)
    distance: float = 6.9
    elevation: float = -50.0   # degrees; negative looks down
    azimuth: float = 90.0      # degrees; 90 looks along +y (from the -y side)


def agent_rgba(model: mujoco.MjModel, agent: int) -> np.ndarray:
    """The RGBA colour agent 0 (A) or 1 (B) is drawn with (that of its torso geom)."""
    return model.geom_rgba[model.geom(AGENT_PREFIXES[agent] + "torso_geom").id].copy()


class BoutRenderer:
    """Frames of one scene (a model built by ``arena.build_model``), as (H, W, 3) uint8 arrays.

    Use it as a context manager, or call :meth:`close`: the GL context is released explicitly.
    ``shadows``: None (the default) draws them with a GPU (egl) and leaves them out in software
    rendering (osmesa), where they make a frame about three times slower.
    """

    def __init__(self, model: mujoco.MjModel, width: int = DEFAULT_WIDTH, height: int = DEFAULT_HEIGHT, *,
                 shadows: bool | None = None, view: CameraView | None = None):
        width, height = int(width), int(height)
        if width < 16 or height < 16:
            raise UserError(f"a frame must be at least 16x16 pixels, got {width}x{height}")
        if width > 4096 or height > 4096:
            raise UserError(f"a frame may be at most 4096x4096 pixels, got {width}x{height}")
        backend = gl_backend()
        self.width, self.height = width, height
        self.shadows = default_shadows(backend) if shadows is None else bool(shadows)
        self.model = m = copy.copy(model)          # a private copy: visual settings only
        m.vis.global_.offwidth = max(int(m.vis.global_.offwidth), width)
        m.vis.global_.offheight = max(int(m.vis.global_.offheight), height)
        m.vis.quality.offsamples = 4
        m.vis.quality.shadowsize = 2048
        m.vis.headlight.ambient[:] = 0.25
        m.vis.headlight.diffuse[:] = 0.35
        m.vis.headlight.specular[:] = 0.1
        if m.nlight:
            sun = np.array([0.15, 0.2, -1.0])   # steeper tilts speckle the floor with shadow acne
            m.light_dir[0] = sun / np.linalg.norm(sun)
            m.light_diffuse[0] = 0.55
            m.light_specular[0] = 0.2
        self._data = mujoco.MjData(m)
        try:
            self._renderer = mujoco.Renderer(m, height, width)
        except UserError:
            raise
        except Exception as exc:
            raise UserError(_no_gl_message({backend: f"{type(exc).__name__}: {exc}"})) from None
        self.camera = self._camera(view or CameraView())

    def _camera(self, view: CameraView) -> mujoco.MjvCamera:
        cam = mujoco.MjvCamera()
        cam.type = mujoco.mjtCamera.mjCAMERA_FREE
        cam.lookat[:] = view.lookat
        aspect = self.width / self.height
        cam.distance = view.distance * max(1.0, (4.0 / 3.0) / aspect)
        cam.elevation = view.elevation
        cam.azimuth = view.azimuth
        return cam

    def render(self, data: mujoco.MjData) -> np.ndarray:
        """A frame of ``data`` (any MjData of the same scene whose kinematics are up to date, as
        after BatchedSumo's step or reset)."""
        r = self._renderer
        r.update_scene(data, self.camera)
        r.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = self.shadows
        return r.render()       # a new array each call

    def render_qpos(self, qpos: np.ndarray) -> np.ndarray:
        """A frame of the scene posed at ``qpos`` (e.g. one recorded from a bout)."""
        d = self._data
        d.qpos[:] = qpos
        d.qvel[:] = 0.0
        mujoco.mj_forward(self.model, d)
        return self.render(d)

    def close(self) -> None:
        r, self._renderer = getattr(self, "_renderer", None), None
        if r is not None:
            r.close()

    def __enter__(self) -> "BoutRenderer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---------------------------------------------------------------------- files
def _check_path(path: str | Path, suffix: str) -> Path:
    path = Path(path)
    if path.suffix.lower() != suffix:
        raise UserError(f"{path} should end in {suffix}")
    if not path.parent.is_dir():  # one rule for every output path (cli.common.check_output)
        raise UserError(f"the folder {path.parent} of {path} does not exist; create it first")
    return path


def write_png(frame: np.ndarray, path: str | Path) -> Path:
    """Write an (H, W, 3) or (H, W, 4) uint8 image as a PNG (no imaging library needed)."""
    path = _check_path(path, ".png")
    img = np.ascontiguousarray(frame, dtype=np.uint8)
    if img.ndim != 3 or img.shape[2] not in (3, 4):
        raise ValueError(f"expected an (H, W, 3|4) image, got shape {img.shape}")
    h, w, c = img.shape
    raw = np.concatenate([np.zeros((h, 1), np.uint8), img.reshape(h, w * c)], axis=1).tobytes()

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body) & 0xFFFFFFFF)

    color_type = 2 if c == 3 else 6
    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b""))
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(png)
    os.replace(tmp, path)
    return path


def check_mp4_target(path: str | Path, width: int, height: int) -> Path:
    """Everything an MP4 needs, checked before any work: the suffix, an even frame size, the
    imageio-ffmpeg package, an existing folder; returns the path."""
    path = _check_path(path, ".mp4")
    if width % 2 or height % 2:
        raise UserError(f"an MP4 needs an even width and height, got {width}x{height}")
    try:
        import imageio_ffmpeg  # noqa: F401
    except ImportError:
        raise UserError("writing MP4 needs imageio-ffmpeg: pip install 'sumo[video]'") from None
    return path


class Mp4Writer:
    """Frames in, an H.264 MP4 out (imageio-ffmpeg), one frame at a time; a context manager.

    The file appears under its name only when the writer is closed without an error."""

    def __init__(self, path: str | Path, width: int, height: int, fps: float = DEFAULT_FPS, quality: float = 7.0):
        self.path = check_mp4_target(path, width, height)
        import imageio_ffmpeg

        self.size = (int(width), int(height))
        self.frames = 0
        self._tmp = self.path.with_name(self.path.stem + ".part.mp4")
        self._gen = imageio_ffmpeg.write_frames(
            str(self._tmp), self.size, fps=fps, codec="libx264", quality=quality, macro_block_size=2,
            pix_fmt_in="rgb24", pix_fmt_out="yuv420p", output_params=["-movflags", "+faststart"],
        )
        self._gen.send(None)

    def write(self, frame: np.ndarray) -> None:
        if frame.shape != (self.size[1], self.size[0], 3):
            raise ValueError(f"expected a {self.size[1]}x{self.size[0]}x3 frame, got {frame.shape}")
        self._gen.send(np.ascontiguousarray(frame, dtype=np.uint8))
        self.frames += 1

    def close(self, ok: bool = True) -> None:
        gen, self._gen = self._gen, None
        if gen is None:
            return
        gen.close()
        if ok and self.frames:
            os.replace(self._tmp, self.path)
        else:
            self._tmp.unlink(missing_ok=True)

    def __enter__(self) -> "Mp4Writer":
        return self

    def __exit__(self, exc_type, *exc) -> None:
        self.close(ok=exc_type is None)


def write_mp4(frames: Iterable[np.ndarray], path: str | Path, fps: float = DEFAULT_FPS) -> int:
    """Write frames (all of one size) to an MP4; returns how many were written."""
    it = iter(frames)
    first = next(it, None)
    if first is None:
        raise ValueError("no frames to write")
    with Mp4Writer(path, first.shape[1], first.shape[0], fps) as w:
        w.write(first)
        for f in it:
            w.write(f)
        return w.frames


# ---------------------------------------------------------------------- bouts with numpy policies
def frame_steps(length: int, every: int = 1) -> list[int]:
    """The env steps a bout of ``length`` steps is drawn at: 0 (the reset pose), every ``every``-th
    step, and always the last."""
    steps = list(range(0, length + 1, every))
    if steps[-1] != length:
        steps.append(length)
    return steps


def bout_poses(body_a: str, body_b: str, policy_a: Callable, policy_b: Callable, physics: str = "faithful",
               seed: int | None = 0, max_steps: int | None = None) -> tuple[np.ndarray, dict]:
    """Play one bout (as ``sumo_env.run_bout``) and keep its poses: (qpos of steps 0..L, summary).

    ``max_steps`` stops early (the summary's outcome is then "running")."""
    from .sumo_env import OUTCOMES, REASONS, UNSTABLE, BatchedSumo

    env = BatchedSumo(body_a, body_b, 1, physics=physics, seed=seed, auto_reset=False, n_threads=1)
    try:
        obs_a, obs_b = env.observe()
        poses = [env.data[0].qpos.copy()]
        outcome, reason = 0, 0
        while max_steps is None or len(poses) <= max_steps:
            act_a = np.asarray(policy_a(obs_a[0]), dtype=np.float64)[None]
            act_b = np.asarray(policy_b(obs_b[0]), dtype=np.float64)[None]
            r = env.step(act_a, act_b)
            obs_a, obs_b = r.obs_a, r.obs_b
            if r.done[0] and r.reason[0] == UNSTABLE:   # MuJoCo reset the data: keep the last pose
                poses.append(poses[-1].copy())
            else:
                poses.append(env.data[0].qpos.copy())
            if r.done[0]:
                outcome, reason = int(r.outcome[0]), int(r.reason[0])
                break
        return np.array(poses), {"outcome": OUTCOMES[outcome], "reason": REASONS[reason],
                                 "length": len(poses) - 1, "model": env.model}
    finally:
        env.close()


def pose_frames(renderer: BoutRenderer, poses: np.ndarray, every: int = 1) -> Iterator[tuple[int, np.ndarray]]:
    """(step, frame) for the frame steps of a recorded bout."""
    for step in frame_steps(len(poses) - 1, every):
        yield step, renderer.render_qpos(poses[step])


def record_bout(body_a: str, body_b: str, policy_a: Callable, policy_b: Callable, path: str | Path, *,
                physics: str = "faithful", seed: int | None = 0, every: int = 1, fps: float = DEFAULT_FPS,
                width: int = DEFAULT_WIDTH, height: int = DEFAULT_HEIGHT, shadows: bool | None = None,
                max_steps: int | None = None) -> dict:
    """Play a bout with two numpy policies (obs -> action) and write it to an MP4.

    Returns the bout's summary (outcome, reason, length) with ``frames`` and ``path`` added."""
    if every < 1:
        raise UserError(f"every must be at least 1, got {every}")
    poses, summary = bout_poses(body_a, body_b, policy_a, policy_b, physics, seed, max_steps)
    model = summary.pop("model")
    with BoutRenderer(model, width, height, shadows=shadows) as rnd, Mp4Writer(path, width, height, fps) as out:
        for _, frame in pose_frames(rnd, poses, every):
            out.write(frame)
    return {**summary, "frames": out.frames, "path": str(out.path)}


def bout_still(body_a: str, body_b: str, policy_a: Callable, policy_b: Callable, path: str | Path, *,
               step: int = 0, physics: str = "faithful", seed: int | None = 0, width: int = DEFAULT_WIDTH,
               height: int = DEFAULT_HEIGHT, shadows: bool | None = None) -> dict:
    """Play a bout up to env step ``step`` (or its end, if sooner) and write that frame as a PNG."""
    if step < 0:
        raise UserError(f"step must be at least 0, got {step}")
    poses, summary = bout_poses(body_a, body_b, policy_a, policy_b, physics, seed, max_steps=step)
    model = summary.pop("model")
    with BoutRenderer(model, width, height, shadows=shadows) as rnd:
        frame = rnd.render_qpos(poses[-1])
    write_png(frame, path)
    return {**summary, "step": len(poses) - 1, "path": str(path)}


def zero_policy(n_actions: int) -> Callable[[np.ndarray], np.ndarray]:
    """A policy that never moves (handy for stills and tests)."""
    zeros = np.zeros(n_actions)
    return lambda obs: zeros


def random_policy(n_actions: int, seed: int = 0) -> Callable[[np.ndarray], np.ndarray]:
    """Uniform random actions in [-1, 1] from its own generator."""
    rng = np.random.default_rng(seed)
    return lambda obs: rng.uniform(-1.0, 1.0, n_actions)
