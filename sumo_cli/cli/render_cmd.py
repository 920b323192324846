"""`sumo render A B`: a video (MP4) or a still (PNG) of A and B's bouts, rendered headless."""

from __future__ import annotations

import os
from pathlib import Path
from typing import List, Optional

import typer

from sumo_cli.cli.common import (
    check_output, err_console, friendly, open_db, print_json, require_positive, resolve_threads, threads_option,
)
from sumo_cli.vocabulary import check_physics

# the values mujoco accepts for MUJOCO_GL on Linux
_KNOWN_GL = ("egl", "osmesa", "glfw", "glx", "enable", "enabled", "on", "true", "1",
             "disable", "disabled", "off", "false", "0")


@friendly
def render(
    ctx: typer.Context,
    agent_a: str = typer.Argument(..., metavar="A", help="Agent A (drawn red), e.g. ant-meta or zoo-ant-lstm-v3@1."),
    agent_b: str = typer.Argument(..., metavar="B", help="Agent B (drawn blue)."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write the video to this MP4."),
    png: Optional[Path] = typer.Option(None, "--png", help="Write one frame of the first --round to this PNG (see --step)."),
    step: int = typer.Option(0, "--step", help="The env step the --png frame shows (0: the start; past the end: the last)."),
    rounds: Optional[List[int]] = typer.Option(
        None, "--round", help="Round of the game to show (1-based; repeat for several in the video; default 1). "
        "Later rounds are replayed with both agents adapting, as in `sumo play` with the same seed."
    ),
    episodes: int = typer.Option(3, "--episodes", help="Episodes per round of the replayed game (as `sumo play`); the first is shown."),
    seed: int = typer.Option(0, "--seed", help="Game seed (as `sumo play --seed`)."),
    physics: str = typer.Option("faithful", "--physics", help="faithful (RK4, as the original) or fast (implicitfast)."),
    threads: Optional[int] = threads_option("Physics threads of the replay"),
    every: int = typer.Option(1, "--frame-every", help="A frame every this many env steps (1 at 20 fps is real time)."),
    fps: int = typer.Option(20, "--fps", help="Frames per second of the video."),
    width: int = typer.Option(480, "--width", help="Frame width in pixels (even, for MP4)."),
    height: int = typer.Option(360, "--height", help="Frame height in pixels (even, for MP4)."),
    shadows: Optional[bool] = typer.Option(
        None, "--shadows/--no-shadows", help="Shadows (default: with a GPU only; they make software rendering about 3x slower)."
    ),
    captions: bool = typer.Option(True, "--captions/--no-captions", help="Names, round and step in the video."),
    json_out: bool = typer.Option(False, "--json", help="Print what was written as JSON on stdout."),
) -> None:
    """Render A against B: the first bout of a round of their game, as an MP4 (--out) and/or a PNG (--png)."""
    from sumo_cli.errors import UserError

    if out is None and png is None:
        raise UserError("nothing to write: give --out FILE.mp4, --png FILE.png, or both")
    check_physics(physics)
    require_positive(episodes, "--episodes")
    threads = resolve_threads(threads, episodes)
    require_positive(every, "--frame-every")
    require_positive(fps, "--fps")
    if step < 0:
        raise UserError(f"--step must be at least 0, got {step}")
    chosen = sorted(set(rounds or [1]))
    if chosen[0] < 1:
        raise UserError(f"--round counts from 1, got {chosen[0]}")
    check_output(png, "--png", ".png")
    check_output(out, "--out", ".mp4")
    gl = os.environ.get("MUJOCO_GL", "").strip().lower()
    if gl and gl not in _KNOWN_GL:  # mujoco itself would refuse to import, with a traceback
        raise UserError(f"MUJOCO_GL={gl} is not a backend MuJoCo knows; unset it (automatic choice) or use osmesa or egl")

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from sumo_cli.compete import video
    from sumo_cli.compete.game import AgentData, GameSettings
    from sumo_cli.store.library import load_agent
    from sumo_cli.sim.render import check_mp4_target, gl_backend

    if out is not None:
        check_mp4_target(out, width, height)
    backend = gl_backend()
    db = open_db(ctx)
    a = AgentData.from_loaded(load_agent(db, agent_a))
    b = AgentData.from_loaded(load_agent(db, agent_b))
    settings = GameSettings(rounds=chosen[-1], episodes=episodes, physics=physics, threads=threads)
    doc: dict = {"a": a.display, "b": b.display, "seed": seed, "gl": backend}

    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeRemainingColumn(), console=err_console, disable=json_out)
    tasks: dict[str, int] = {}

    def on_progress(stage: str, done: int, total: int) -> None:
        if stage not in tasks:
            tasks[stage] = progress.add_task("replaying rounds" if stage == "replay" else "rendering frames", total=total)
        progress.update(tasks[stage], completed=done, total=total)

    with progress:
        traces = video.replay_rounds(a, b, settings, seed, [r - 1 for r in chosen],
                                     on_round=lambda d, n: on_progress("replay", d, n))
        if out is not None:
            doc["video"] = video.render_video(
                [traces[r - 1] for r in chosen], out, every=every, fps=fps, width=width, height=height,
                shadows=shadows, captions=captions, on_progress=on_progress,
            )
        if png is not None:
            doc["still"] = video.render_still(traces[chosen[0] - 1], png, step, width=width, height=height,
                                              shadows=shadows)
    if json_out:
        print_json(doc)
        return
    if out is not None:
        v = doc["video"]
        rounds_text = "; ".join(f"round {r['round']}: {r['outcome']} by {r['reason']} in {r['length']} steps"
                                for r in v["rounds"])
        err_console.print(f"wrote {v['path']}: {v['frames']} frames at {fps} fps ({rounds_text}, from A's side); "
                          f"{v['seconds']['per_frame'] * 1000:.0f} ms a frame with {backend}")
    if png is not None:
        s = doc["still"]
        note = f" (the bout ended at step {s['length']})" if step > s["length"] else ""
        err_console.print(f"wrote {s['path']}: round {s['round']}, step {s['step']}{note}")
