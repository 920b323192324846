"""Square brackets in user text (names, paths, plans) are printed as they are: Rich reads no markup
in them, so no command ends in a MarkupError traceback and no bracket vanishes from a message."""

from __future__ import annotations

from pathlib import Path

import pytest

B = "[/b]"  # a closing tag that opens nothing: Rich's markup parser raises on it
PLAN = "[/x].toml"


@pytest.mark.parametrize("args, shown", [
    (("play", f"ant-{B}", "bug-mlp", "--rounds", "2"), f"ant-{B}"),
    (("play", "ant-mlp", "bug-mlp", "--plot", f"{B}/p.png"), f"{B}/p.png"),
    (("agents", "show", f"x{B}"), f"x{B}"),
    (("tournament", "--agents", f"ant-{B},bug-mlp"), f"ant-{B}"),
    (("tournament", "--population", "105", "--heatmap", f"{B}/h.png"), f"{B}/h.png"),
    (("tournament", "--plan", PLAN), PLAN),
    (("evolve", "--agents", f"ant-{B},bug-mlp"), f"ant-{B}"),
    (("evolve", "--plot", f"{B}/e.png"), f"{B}/e.png"),
    (("experiment", "adaptation", "--agents", f"ant-{B}"), f"ant-{B}"),
    (("train", "--body", "ant", "--name", f"a{B}"), f"a{B}"),
    (("train", "--body", "ant", "--strategy", "track", "--opponents", f"bug-{B}"), f"bug-{B}"),
    (("render", f"ant-{B}", "bug-mlp", "--png", "r.png"), f"ant-{B}"),
    (("report", "--out", f"{B}/r"), B),
    (("matches", "--csv", f"{B}/m.csv"), f"{B}/m.csv"),
    (("runs", "--csv", f"{B}/r.csv"), f"{B}/r.csv"),
    (("eval", "sumo", f"ant-{B}"), f"ant-{B}"),
    (("eval", "locomotion", f"loco-{B}"), f"loco-{B}"),
    (("zoo", "import", f"{B}/zoo"), f"{B}/zoo"),
    (("population", "show", "--plan", PLAN), PLAN),
    (("population", "train", "--plan", PLAN), PLAN),
    (("--db", f"sqlite:///{B}/x/sumo.sqlite", "agents"), B),
])
def test_bracketed_user_text_is_echoed_as_it_is(cli, args, shown):
    code, _, err = cli(*args)
    assert code == 2, err
    assert shown in err, err


def test_a_plan_with_bracketed_text_keeps_its_brackets_in_the_message(cli, tmp_path: Path):
    (tmp_path / "empty.toml").write_text('format = "sumo-population-plan"\nformat_version = 1\n')
    code, _, err = cli("population", "show", "--plan", "empty.toml")
    assert code == 2 and "has no [[steps]]" in err, err
    (tmp_path / "named.toml").write_text('format = "sumo-population-plan"\nformat_version = 1\n'
                                         '[[steps]]\nname = "[bold]x[/]"\nmember = "ant-[/b]"\ntrain = "--body ant"\n')
    code, _, err = cli("population", "show", "--plan", "named.toml")
    assert code == 2 and "'[bold]x[/]' is not a valid agent name" in err, err
