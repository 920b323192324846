"""What a new user meets first: the README's five commands and its links to the results, and the
tour's zoo line, which must not read an unset SUMO_ZOO_DIR as the current folder."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_an_empty_zoo_path_is_refused_not_read_as_the_current_folder(cli, tmp_path):
    (tmp_path / "ant-lstm-v1.npy").write_bytes(b"not a policy")  # what the current folder may hold
    code, out, err = cli("zoo", "import", "")
    assert code == 2 and "got an empty PATH (is SUMO_ZOO_DIR set?)" in " ".join(err.split()), err
    assert out == "" and not (tmp_path / "db").exists()


def _game_52_48() -> dict:
    """A 100-round game whose rounds went 52-48 to A: inside the 5% margin, so a draw."""
    rounds = []
    for k in range(100):
        out = "win" if k < 52 else "loss"
        rounds.append({"index": k, "version_a": 1, "version_b": 1, "outcome": "a" if out == "win" else "b",
                       "wins_a": int(out == "win"), "wins_b": int(out == "loss"), "draws": 0,
                       "episodes": [{"outcome": out, "reason": "ring_out", "length": 100}]})
    return {"a": "ant-mlp", "b": "bug-mlp", "outcome": "draw", "rounds_won_a": 52, "rounds_won_b": 48,
            "rounds_drawn": 0, "rounds": rounds, "settings": {"rounds": 100, "episodes": 1, "physics": "fast"},
            "seed": 0, "wall_seconds": 1.0, "timing": {}}


def test_a_52_48_draw_says_why_where_it_is_printed(capsys):
    from sumo_cli.cli.matches_cmd import print_match
    from sumo_cli.cli.play_cmd import _print_summary
    from sumo_cli.compete.rules import game_outcome
    from sumo_cli.compete.summary import summarise

    game = _game_52_48()
    assert game_outcome(52, 48, 100) == "draw"
    why = "a draw (a game is won by at least 5 more rounds won than the other side, 5% of the 100 played)"
    _print_summary(game, summarise(game), 7)
    assert why in " ".join(capsys.readouterr().err.split())
    doc = {**game, "id": 7, "run_id": None, "run_index": None, "interrupted": False, "code_version": "x",
           "mujoco_version": "y"}
    print_match(doc, summarise(game))
    assert why in " ".join(capsys.readouterr().err.split())


def test_the_readme_runs_the_fast_tests_and_ci_runs_them_all():
    readme = (REPO / "README.md").read_text()
    assert ".venv/bin/python -m pytest -m \"not slow\"\n" in readme
    ci = (REPO / ".ci" / "run").read_text()
    last = [ln for ln in ci.splitlines() if "pytest" in ln and not ln.startswith("#")][-1]
    assert last.endswith(".venv/bin/python -m pytest") and re.search(r"\s-m\s", last.split("pytest", 1)[1]) is None
