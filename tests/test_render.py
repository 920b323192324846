"""Headless rendering: stills show both agents and the arena, MP4s decode to the frames written,
game replays match the games `sumo play` plays, and `sumo render` / `sumo play --video` work.

Rendering tests skip, with the reason, where no GL backend works (on a CPU machine: install
libosmesa6); where one does, they must pass.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from sumo_cli.sim import render as R

W, H = 320, 240


@pytest.fixture(scope="module")
def gl() -> str:
    ok, why = R.gl_available()
    if not ok:
        pytest.skip(reason=f"no OpenGL backend for headless rendering: {why}")
    return why


def _chroma(x) -> np.ndarray:
    x = np.asarray(x, dtype=float)[..., :3]
    return x / np.maximum(x.sum(-1, keepdims=True), 1e-9)


def _colour_counts(img: np.ndarray, model) -> dict[str, int]:
    """Pixels of each scene colour: the same chromaticity (shading scales brightness, not hue) within
    0.03, and not dark. Anti-aliased edges of the red border lines blend into colours close to
    agent A's, so a frame without agents still counts a few "A" pixels (see the control below)."""
    c = _chroma(img)
    lit = img[..., :3].astype(int).sum(-1) > 60
    colours = {
        "a": R.agent_rgba(model, 0), "b": R.agent_rgba(model, 1),
        "tatami": model.geom_rgba[model.geom("tatami").id], "border": model.geom_rgba[model.geom("border_xp").id],
    }
    return {k: int(((np.abs(c - _chroma(v)).max(-1) < 0.03) & lit).sum()) for k, v in colours.items()}


def _make_agent(name: str, body: str, arch: str, strategy: str, seed: int):
    import torch

    from sumo_cli.compete.game import AgentData
    from sumo_cli.nets import normalizer as nz
    from sumo_cli.nets import policy as P
    from sumo_cli.sim.bodies import body_spec

    b = body_spec(body)
    spec = P.PolicySpec(arch, obs_dim=b.obs_size, act_dim=b.n_actions, hidden=16)
    params = {k: v.numpy() for k, v in P.init_params(spec, torch.Generator().manual_seed(seed)).items()}
    return AgentData(name, 1, body, strategy, spec.to_dict(), params, nz.new_stats(b.obs_size, backend="numpy"))


def _decode(path: Path) -> list[np.ndarray]:
    import imageio.v2 as iio

    with iio.get_reader(str(path)) as reader:
        return [np.asarray(f) for f in reader]


# ---------------------------------------------------------------------- GL backend
def test_importing_the_simulation_loads_no_gl_library():
    """With MUJOCO_GL unset, mujoco's own import would load GLFW, whose library search runs Python
    child processes (in every pool worker; a worker ended during it printed their tracebacks)."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "MUJOCO_GL"}
    code = ("import os, sys; import sumo_cli.selfplay.sumo_vec, sumo_cli.compete.engine, sumo_cli.cli.app; "
            "print('glfw' in sys.modules, os.environ.get('MUJOCO_GL'))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "None"], out


def test_no_working_gl_backend_is_one_sentence(monkeypatch):
    from sumo_cli.errors import UserError

    monkeypatch.setattr(R, "_backend", None)
    monkeypatch.delenv("MUJOCO_GL", raising=False)
    monkeypatch.delenv("PYOPENGL_PLATFORM", raising=False)  # no platform asked for: each backend is probed
    monkeypatch.setattr(R, "auto_candidates", lambda: ["osmesa", "egl"])
    monkeypatch.setattr(R, "_probe", lambda backend: f"{backend} cannot open a context")
    with pytest.raises(UserError) as exc:
        R.gl_backend()
    msg = str(exc.value)
    assert msg.startswith("no OpenGL backend for headless rendering works") and "libosmesa6" in msg
    assert "osmesa: osmesa cannot open a context" in msg and "\n" not in msg
    assert "MUJOCO_GL" not in os.environ   # nothing was installed
    monkeypatch.setenv("MUJOCO_GL", "off")
    with pytest.raises(UserError, match="rendering is off"):
        R.gl_backend()


def test_auto_choice_prefers_egl_with_a_gpu(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setattr(R, "_has_gpu", lambda: True)
    assert R.auto_candidates() == ["egl", "osmesa"]
    monkeypatch.setattr(R, "_has_gpu", lambda: False)
    assert R.auto_candidates() == ["osmesa", "egl"]


# ---------------------------------------------------------------------- stills
def test_png_still_shows_both_agents_and_the_arena(gl, tmp_path):
    import imageio.v3 as iio

    from sumo_cli.sim.arena import build_model

    out = tmp_path / "still.png"
    info = R.bout_still("ant", "bug", R.random_policy(8, 1), R.random_policy(12, 2), out, step=10, seed=3,
                        width=W, height=H, shadows=False)
    assert info["step"] == 10
    img = iio.imread(out)
    assert img.shape == (H, W, 3) and img.dtype == np.uint8
    model = build_model("ant", "bug")
    n = W * H
    counts = _colour_counts(img, model)
    assert counts["a"] > 0.005 * n and counts["b"] > 0.005 * n, counts       # both agents, in their colours
    assert counts["tatami"] > 0.2 * n and counts["border"] > 0.003 * n, counts  # the ring and its border lines

    # the counts really are the agents: moved far out of view, their colours vanish
    poses, summary = R.bout_poses("ant", "bug", R.zero_policy(8), R.zero_policy(12), seed=3, max_steps=0)
    away = poses[0].copy()
    for prefix, x in (("agent0/", 60.0), ("agent1/", -60.0)):
        q = int(model.joint(prefix + "root").qposadr[0])
        away[q:q + 2] = (x, 60.0)
    with R.BoutRenderer(summary["model"], W, H, shadows=True) as rnd:
        empty = rnd.render_qpos(away)
        with_agents = rnd.render_qpos(poses[0])
    gone = _colour_counts(empty, model)
    back = _colour_counts(with_agents, model)
    assert back["a"] > 0.005 * n and back["b"] > 0.005 * n, back
    assert gone["a"] < 0.35 * back["a"] and gone["b"] < 0.05 * back["b"], (gone, back)
    assert gone["tatami"] > 0.2 * n


def test_png_writer_round_trips(tmp_path):
    import imageio.v3 as iio

    rng = np.random.default_rng(0)
    for c in (3, 4):
        img = rng.integers(0, 256, (7, 5, c), dtype=np.uint8)
        R.write_png(img, tmp_path / f"x{c}.png")
        assert np.array_equal(iio.imread(tmp_path / f"x{c}.png"), img)


# ---------------------------------------------------------------------- videos
def test_mp4_of_a_short_bout_decodes_to_its_frames(gl, tmp_path):
    out = tmp_path / "bout.mp4"
    info = R.record_bout("ant", "spider", R.random_policy(8, 1), R.random_policy(16, 2), out, seed=3,
                         max_steps=12, width=160, height=120, shadows=False)
    assert info["length"] == 12 and info["frames"] == 13   # the start pose and every step
    frames = _decode(out)
    assert len(frames) == 13 and frames[0].shape == (120, 160, 3)
    assert not (tmp_path / "bout.part.mp4").exists()

    info = R.record_bout("ant", "spider", R.random_policy(8, 1), R.random_policy(16, 2), tmp_path / "every5.mp4",
                         seed=3, max_steps=12, every=5, width=160, height=120, shadows=False)
    assert info["frames"] == len(R.frame_steps(12, 5)) == 4   # steps 0, 5, 10 and the last, 12
    assert len(_decode(tmp_path / "every5.mp4")) == 4


def test_bad_targets_are_one_sentence_errors(tmp_path):
    from sumo_cli.errors import UserError

    with pytest.raises(UserError, match="even width"):
        R.check_mp4_target(tmp_path / "x.mp4", 161, 120)
    with pytest.raises(UserError, match="should end in .mp4"):
        R.check_mp4_target(tmp_path / "x.avi", 160, 120)


def test_replay_matches_the_game_play_game_plays():
    """The video's rounds are the game's: same episodes, with the adaptation between rounds."""
    from sumo_cli.compete.game import GameSettings, play_game
    from sumo_cli.compete.video import replay_rounds

    a = _make_agent("tracker", "ant", "lstm", "track", 1)
    b = _make_agent("still", "bug", "mlp", "none", 2)
    settings = GameSettings(rounds=2, episodes=2, physics="fast", threads=1)
    game = play_game(a, b, settings, seed=5)
    traces = replay_rounds(a, b, settings, 5, [0, 1])
    for r in range(2):
        ep = game.rounds[r].episodes[0]
        tr = traces[r]
        assert (tr.outcome, tr.reason, tr.length) == (ep.outcome, ep.reason, ep.length)
        assert tr.poses.shape == (ep.length + 1, 34)
    # the replay did adapt: without A's update after round 1, round 2 goes differently
    frozen = _make_agent("tracker", "ant", "lstm", "none", 1)
    other = replay_rounds(frozen, b, settings, 5, [1])[1]
    assert np.array_equal(other.poses[0], traces[1].poses[0])      # the same start (bout seed)
    n = min(len(other.poses), len(traces[1].poses))
    assert not np.array_equal(other.poses[:n], traces[1].poses[:n])


def test_record_game_video_first_and_last_round(gl, tmp_path):
    from sumo_cli.compete.game import GameSettings
    from sumo_cli.compete.video import record_game_video

    job = SimpleNamespace(
        a=_make_agent("a", "ant", "mlp", "none", 3), b=[_make_agent("b", "ant", "mlp", "none", 4)],
        settings=GameSettings(rounds=3, episodes=1, physics="fast"), seed=11,
    )
    out = tmp_path / "game.mp4"
    doc = record_game_video(job, out, width=160, height=120, every=2, shadows=False, hold=3)
    assert [r["round"] for r in doc["rounds"]] == [1, 3]
    expected = sum(len(R.frame_steps(r["length"], 2)) + 3 for r in doc["rounds"])
    assert doc["frames"] == expected
    frames = _decode(out)
    assert len(frames) == expected and frames[0].shape == (120, 160, 3)


# ---------------------------------------------------------------------- the CLI
@pytest.fixture
def zoo_pair(cli, zoo_dir, tmp_path):
    """A database with two original zoo agents (imported from a two-file copy of the zoo)."""
    sub = tmp_path / "zoo2"
    sub.mkdir()
    for f in ("ant-lstm-v3.npy", "bug-lstm-v3.npy"):
        shutil.copy(Path(zoo_dir) / f, sub / f)
    code, _, err = cli("zoo", "import", sub)
    assert code == 0, err
    return "zoo-ant-lstm-v3", "zoo-bug-lstm-v3"


@pytest.mark.slow
def test_cli_render_video_and_still(gl, cli, zoo_pair, tmp_path):
    a, b = zoo_pair
    code, out, err = cli("render", a, b, "--out", tmp_path / "bout.mp4", "--png", tmp_path / "still.png", "--step", 20,
                         "--episodes", 1, "--physics", "fast", "--seed", 3, "--frame-every", 5, "--width", 160, "--height", 120,
                         "--json")
    assert code == 0, err
    doc = json.loads(out)
    length = doc["video"]["rounds"][0]["length"]
    assert doc["video"]["frames"] == len(R.frame_steps(length, 5)) + 10
    assert len(_decode(tmp_path / "bout.mp4")) == doc["video"]["frames"]
    assert doc["still"]["step"] == min(20, length)
    import imageio.v3 as iio

    assert iio.imread(tmp_path / "still.png").shape == (120, 160, 3)


def test_cli_render_needs_an_output(cli):
    code, _, err = cli("render", "x", "y")
    assert code == 2 and "nothing to write" in err


@pytest.mark.slow
def test_cli_play_video_records_first_and_last_round(cli, zoo_pair, tmp_path, monkeypatch):
    """`sumo play --video` hands the game to record_game_video (the real recording is tested above)."""
    import sumo_cli.compete.video as video

    calls = []
    monkeypatch.setattr(video, "record_game_video", lambda job, path, **kw: calls.append((job, path)))
    a, b = zoo_pair
    code, _, err = cli("play", a, b, "--rounds", 2, "--episodes", 1, "--physics", "fast", "--threads", 1,
                       "--video", tmp_path / "game.mp4", "--json")
    assert code == 0, err
    (job, path), = calls
    assert path == tmp_path / "game.mp4" and job.settings.rounds == 2 and job.a.display == f"{a}@1"
