"""Videos and stills of iterated games: the agents' policies replay chosen rounds, sim.render draws them.

A round of a game depends on everything before it (both agents adapt between rounds), so a round is
shown by replaying the game from its start up to that round with ``game.play_game`` itself (its
per-step hook records the poses). The replay is therefore the game that ``sumo play`` with the same
agents, settings and seed played (``tests/test_render.py`` checks that the episodes match), and it
is deterministic given the game seed. Of each chosen round the first episode (bout) is kept as
poses, one per env step, and rendered afterwards.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

import numpy as np
import torch

from sumo_cli.compete.game import AgentData, GameSettings, play_game
from sumo_cli.errors import UserError

_HOLD = 10   # frames the last pose of each round is held for (half a second at 20 fps)


@dataclass
class RoundTrace:
    """The first episode of one round: its poses (qpos at env steps 0..length) and result."""

    index: int           # 0-based round
    a: str               # display names of the versions that played it
    b: str
    poses: np.ndarray    # (length + 1, nq)
    outcome: str         # from A's side: "win", "loss", "draw"
    reason: str          # "ring_out", "fall", "timeout", "unstable"
    length: int
    model: object        # the scene's mujoco.MjModel


def replay_rounds(
    a: AgentData,
    b: AgentData | list[AgentData],
    settings: GameSettings,
    seed: int,
    rounds: Iterable[int],
    on_round: Callable[[int, int], None] | None = None,
) -> dict[int, RoundTrace]:
    """Replay a game up to the last of ``rounds`` (0-based) and return those rounds' first episodes.

    ``b`` may be a list of versions, one per round (a learning opponent), as for play_game.
    ``on_round(done, total)`` is called after every replayed round."""
    from sumo_cli.sim.sumo_env import UNSTABLE

    wanted = sorted({int(r) for r in rounds})
    if not wanted:
        raise UserError("choose at least one round to show")
    bad = [r + 1 for r in wanted if not 0 <= r < settings.rounds]
    if bad:
        raise UserError(f"round {bad[0]} is not in the game, which has rounds 1..{settings.rounds}")
    b_versions = b if isinstance(b, list) else [b]
    last = wanted[-1]
    poses: dict[int, list[np.ndarray]] = {}
    models: dict[int, object] = {}

    def on_step(r: int, env, res, active) -> None:  # noqa: ANN001
        if r not in wanted:
            return
        if res is None:
            poses[r], models[r] = [env.data[0].qpos.copy()], env.model
        elif active[0]:
            broken = res.done[0] and res.reason[0] == UNSTABLE  # MuJoCo reset it: keep the last pose
            poses[r].append(poses[r][-1].copy() if broken else env.data[0].qpos.copy())

    threads_before = torch.get_num_threads()
    try:
        result = play_game(a, b, settings, seed, on_step=on_step, stop_after=last,
                           on_round=None if on_round is None else (lambda rd: on_round(rd.index + 1, last + 1)))
    finally:
        torch.set_num_threads(threads_before)
    traces = {}
    for r in wanted:
        ep = result.rounds[r].episodes[0]
        traces[r] = RoundTrace(r, a.display, b_versions[min(r, len(b_versions) - 1)].display, np.array(poses[r]),
                               ep.outcome, ep.reason, ep.length, models[r])
    return traces


# ---------------------------------------------------------------------- captions
def _caption(frame: np.ndarray, lines: list[str]) -> np.ndarray:
    """The frame with a few lines of text in a dark band at its top (unchanged without Pillow)."""
    try:
        from PIL import Image, ImageDraw, ImageFont
    except ImportError:  # pragma: no cover - Pillow comes with matplotlib
        return frame
    img = Image.fromarray(frame)
    size = max(10, frame.shape[0] // 26)
    try:
        font = ImageFont.load_default(size=size)
    except TypeError:  # pragma: no cover - Pillow < 10.1
        font = ImageFont.load_default()
    band = Image.new("RGBA", img.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(band)
    draw.rectangle((0, 0, img.size[0], (size + 4) * len(lines) + 6), fill=(0, 0, 0, 140))
    for k, text in enumerate(lines):
        draw.text((8, 4 + k * (size + 4)), text, fill=(255, 255, 255, 255), font=font)
    return np.asarray(Image.alpha_composite(img.convert("RGBA"), band).convert("RGB"))


def _result_text(tr: RoundTrace) -> str:
    how = tr.reason.replace("_", "-")
    if tr.outcome == "win":
        return f"A wins by {how} at step {tr.length}"
    if tr.outcome == "loss":
        return f"B wins by {how} at step {tr.length}"
    return f"draw ({how}) at step {tr.length}"


# ---------------------------------------------------------------------- videos and stills
def render_video(
    traces: list[RoundTrace],
    path: str | Path,
    *,
    every: int = 1,
    fps: float = 20.0,
    width: int = 480,
    height: int = 360,
    shadows: bool | None = None,
    captions: bool = True,
    hold: int = _HOLD,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Write replayed rounds' first episodes, one after another, to an MP4: a frame every ``every``
    env steps (20 fps with every=1 is real time), the last pose of each held for ``hold`` frames.
    Returns {"path", "frames", "rounds": [{round, a, b, outcome, reason, length}], "seconds": {...}}."""
    from sumo_cli.sim.render import BoutRenderer, Mp4Writer, frame_steps

    if every < 1:
        raise UserError(f"--frame-every must be at least 1, got {every}")
    if not traces:
        raise UserError("no rounds to show")
    progress = on_progress or (lambda *args: None)
    t0 = time.perf_counter()
    total = sum(len(frame_steps(tr.length, every)) + hold for tr in traces)
    done = rendered = 0
    with BoutRenderer(traces[0].model, width, height, shadows=shadows) as rnd, \
            Mp4Writer(path, width, height, fps) as out:
        for tr in traces:
            head = f"{tr.a} (red) vs {tr.b} (blue)   round {tr.index + 1}"
            frame = None
            for step in frame_steps(tr.length, every):
                frame = rnd.render_qpos(tr.poses[step])
                rendered += 1
                out.write(_caption(frame, [head, f"step {step}"]) if captions else frame)
                done += 1
                progress("render", done, total)
            end = _caption(frame, [head, _result_text(tr)]) if captions else frame
            for _ in range(hold):
                out.write(end)
            done += hold
            progress("render", done, total)
    seconds = time.perf_counter() - t0
    return {
        "path": str(out.path), "frames": out.frames,
        "rounds": [{"round": tr.index + 1, "a": tr.a, "b": tr.b, "outcome": tr.outcome, "reason": tr.reason,
                    "length": tr.length} for tr in traces],
        "seconds": {"render": seconds, "per_frame": seconds / max(1, rendered)},
    }


def render_still(trace: RoundTrace, path: str | Path, step: int = 0, *, width: int = 480, height: int = 360,
                 shadows: bool | None = None, captions: bool = False) -> dict:
    """Write the frame at env ``step`` of a replayed episode as a PNG (a step past the bout's end
    shows its last frame). Returns {"path", "round", "step", "length", "outcome", "reason", "a", "b"}."""
    from sumo_cli.sim.render import BoutRenderer, write_png

    if step < 0:
        raise UserError(f"--step must be at least 0, got {step}")
    shown = min(step, trace.length)
    with BoutRenderer(trace.model, width, height, shadows=shadows) as rnd:
        frame = rnd.render_qpos(trace.poses[shown])
    if captions:
        frame = _caption(frame, [f"{trace.a} (red) vs {trace.b} (blue)   round {trace.index + 1}", f"step {shown}"])
    write_png(frame, path)
    return {"path": str(path), "round": trace.index + 1, "step": shown, "length": trace.length,
            "outcome": trace.outcome, "reason": trace.reason, "a": trace.a, "b": trace.b}


def record_rounds(
    a: AgentData,
    b: AgentData | list[AgentData],
    settings: GameSettings,
    seed: int,
    path: str | Path,
    rounds: Iterable[int],
    *,
    width: int = 480,
    height: int = 360,
    on_progress: Callable[[str, int, int], None] | None = None,
    **kwargs,
) -> dict:
    """Replay a game's chosen rounds (0-based) and write their first episodes to an MP4 (see
    :func:`render_video` for the keywords). ``on_progress(stage, done, total)`` reports "replay" and
    "render". Everything that could stop the video (no GL, a bad path or size) fails before the replay."""
    from sumo_cli.sim.render import check_mp4_target, gl_backend

    gl_backend()
    check_mp4_target(path, width, height)
    progress = on_progress or (lambda *args: None)
    t0 = time.perf_counter()
    traces = replay_rounds(a, b, settings, seed, rounds, on_round=lambda d, n: progress("replay", d, n))
    replay = time.perf_counter() - t0
    doc = render_video([traces[r] for r in sorted(traces)], path, width=width, height=height,
                       on_progress=on_progress, **kwargs)
    doc["seconds"]["replay"] = replay
    return doc


def record_game_video(job, path: str | Path, rounds: Iterable[int] | None = None, **kwargs) -> dict:  # noqa: ANN001
    """Record a game's rounds to an MP4. ``job`` is a play.GameJob (or anything with ``a``, ``b``
    (a list of versions: one, or one per round), ``settings`` and ``seed``); ``rounds`` are 0-based
    and default to the first and the last. Other keywords go to :func:`record_rounds`."""
    n = job.settings.rounds
    chosen = sorted({0, n - 1}) if rounds is None else list(rounds)
    b = job.b if len(job.b) > 1 else job.b[0]
    return record_rounds(job.a, b, job.settings, job.seed, path, chosen, **kwargs)


def game_still(
    a: AgentData,
    b: AgentData | list[AgentData],
    settings: GameSettings,
    seed: int,
    path: str | Path,
    round_index: int = 0,
    step: int = 0,
    **kwargs,
) -> dict:
    """Replay a game up to a round (0-based) and write the frame at env ``step`` of its first
    episode as a PNG (keywords: see :func:`render_still`)."""
    from sumo_cli.sim.render import gl_backend

    gl_backend()
    trace = replay_rounds(a, b, settings, seed, [round_index])[round_index]
    return render_still(trace, path, step, **kwargs)
