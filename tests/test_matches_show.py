"""Stored games as a person reads them: an interrupted game is marked and counts as no result;
`matches show` prints the game and a table of its rounds (or JSON)."""

from __future__ import annotations

import json

GAME = ("--rounds", "3", "--episodes", "2", "--physics", "fast")


def test_an_interrupted_game_is_marked_and_left_out_of_the_record(shipped_ants, cli, monkeypatch):
    from sumo_cli.compete import play as play_module

    real = play_module.play_game

    def stopped_after_one_round(a, b, settings, seed, on_round=None, **kw):  # noqa: ANN001
        def then_ctrl_c(rd):  # noqa: ANN001
            on_round(rd)
            raise KeyboardInterrupt

        return real(a, b, settings, seed, on_round=then_ctrl_c, **kw)

    monkeypatch.setattr(play_module, "play_game", stopped_after_one_round)
    code, out, err = cli("play", "ant-mlp", "sparring-ant", *GAME)
    assert code == 130, err
    monkeypatch.setattr(play_module, "play_game", real)
    code, out, err = cli("play", "ant-mlp", "sparring-ant", *GAME)
    assert code == 0, err

    code, out, err = cli("matches", "--json")
    rows = {r["id"]: r for r in json.loads(out)}
    assert rows[1]["interrupted"] and not rows[2]["interrupted"]
    code, out, err = cli("matches", "show", "1", "--json")
    assert json.loads(out)["wall_seconds"] > 0  # the time it played, not 0
    code, out, err = cli("matches")
    assert "interrupted" in err
    code, out, err = cli("agents", "show", "ant-mlp", "--json")
    record = json.loads(out)["record"]
    assert (record["games"], record["interrupted"]) == (1, 1)
    assert record["wins"] + record["draws"] + record["losses"] == 1

    code, out, err = cli("matches", "show", "1")
    assert code == 0 and out == "", err
    text = " ".join(err.split())
    assert "interrupted after 1 of 3 rounds (no result)" in text
    assert "{" not in err  # not a raw dict
    code, out, err = cli("matches", "show", "2")
    assert "3 rounds x 2 bouts, fast physics" in " ".join(err.split()) and "round" in err
    code, out, err = cli("matches", "show", "2", "--json")
    doc = json.loads(out)
    assert len(doc["rounds"]) == 3 and doc["interrupted"] is False
