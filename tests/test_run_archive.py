"""`sumo runs export` / `sumo runs import`: a run of games carried to another database continues
there with the results it would have had where it started, and a finished one shows the same
leaderboard or shares; archives that are damaged, foreign or name versions the database lacks are
refused in one sentence, with nothing written."""

from __future__ import annotations

import gzip
import json
import sqlite3

import pytest

pytestmark = pytest.mark.usefixtures("one_torch_thread")

GAME = ("--rounds", "2", "--episodes", "2", "--physics", "fast", "--seed", "5", "-j", "1")
AGENTS = "ant-mlp,sparring-ant:track"


def _json(cli, *args):  # noqa: ANN001, ANN202
    code, out, err = cli(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def _cut(db, keep_games: int, keep_generations: int | None = None) -> None:
    """Make run 1 of ``db`` look interrupted after its first ``keep_games`` games (and, for an
    evolution, its first ``keep_generations`` generations of members), as a kill leaves it."""
    con = sqlite3.connect(db)
    late = "select id from matches where run_id = 1 and run_index >= ?"
    con.execute(f"delete from episodes where round_id in (select id from rounds where match_id in ({late}))",
                (keep_games,))
    con.execute(f"delete from rounds where match_id in ({late})", (keep_games,))
    con.execute("delete from ratings where run_id = 1")
    con.execute("delete from matches where run_id = 1 and run_index >= ?", (keep_games,))
    if keep_generations is not None:
        con.execute("delete from members where run_id = 1 and generation >= ?", (keep_generations,))
    con.execute("update runs set status = 'running', progress_done = ?, owner = null, finished_at = null "
                "where id = 1", (keep_games,))
    con.commit()
    con.close()


def _signed(doc: dict) -> bytes:
    """An archive file of ``doc`` whose recorded SHA-256 matches its (edited) payload."""
    import hashlib

    payload = json.dumps(doc["payload"], sort_keys=True, separators=(",", ":")).encode()
    return gzip.compress(json.dumps({**doc, "sha256": hashlib.sha256(payload).hexdigest()}).encode())


def test_a_tournament_resumed_in_another_database_ends_as_it_would_have(shipped_ants, cli, tmp_path):
    whole = _json(cli, "--db", "whole.sqlite", "tournament", "--agents", AGENTS, "--matches", "6", *GAME)
    assert _json(cli, "--db", "part.sqlite", "tournament", "--agents", AGENTS, "--matches", "6", *GAME)["run_id"] == 1
    _cut(tmp_path / "part.sqlite", 3)

    written = _json(cli, "--db", "part.sqlite", "runs", "export", "1", "--out", "part.json.gz")
    assert (written["status"], written["games"]) == ("running", 3)
    code, out, err = cli("--db", "elsewhere.sqlite", "runs", "import", "part.json.gz")
    assert code == 0, err
    assert "imported part.json.gz as tournament run 1 (interrupted, 3 games stored)" in err
    resume = err.split("continue it with: ")[1].split()
    assert resume[:2] == ["sumo", "--db"] and resume[3:] == ["tournament", "--resume", "1"]

    resumed = _json(cli, "--db", "elsewhere.sqlite", "tournament", "--resume", "1")
    assert resumed["leaderboard"] == whole["leaderboard"]
    shown = _json(cli, "--db", "elsewhere.sqlite", "runs", "show", "1")
    assert shown["results"]["rated"] == 6 and shown["run"]["status"] == "finished"


def test_a_finished_run_reads_the_same_after_the_trip(shipped_ants, cli):
    _json(cli, "--db", "a.sqlite", "evolve", "--agents", AGENTS, "--copies", "2", "--generations", "2",
          "--matches", "3", *GAME)
    _json(cli, "--db", "a.sqlite", "runs", "export", "1", "--out", "evo.json.gz")
    again = _json(cli, "--db", "a.sqlite", "runs", "export", "1", "--out", "evo2.json.gz")
    assert open("evo.json.gz", "rb").read() == open(again["path"], "rb").read()  # same run, same bytes
    _json(cli, "--db", "b.sqlite", "tournament", "--agents", AGENTS, "--matches", "1", *GAME)  # ids differ there
    imported = _json(cli, "--db", "b.sqlite", "runs", "import", "evo.json.gz")
    assert (imported["id"], imported["status"], imported["resume"]) == (2, "finished", None)
    before = _json(cli, "--db", "a.sqlite", "runs", "show", "1")
    after = _json(cli, "--db", "b.sqlite", "runs", "show", "2")
    assert after["generations"] == before["generations"] and len(after["generations"]) == 3
    code, out, _ = cli("--db", "a.sqlite", "matches", "--json")
    code2, out2, _ = cli("--db", "b.sqlite", "matches", "--json")
    games = lambda doc, run: sorted((m["a"], m["b"], m["outcome"], m["rounds"]) for m in json.loads(doc)  # noqa: E731
                                    if m.get("run_id") == run)
    assert games(out2, 2) == games(out, 1) and len(games(out, 1)) == 6


def test_an_evolution_resumed_in_another_database_ends_as_it_would_have(shipped_ants, cli, tmp_path):
    args = ("evolve", "--agents", AGENTS, "--copies", "2", "--generations", "2", "--matches", "3", *GAME)
    whole = _json(cli, "--db", "whole.sqlite", *args)
    _json(cli, "--db", "part.sqlite", *args)
    _cut(tmp_path / "part.sqlite", 4, keep_generations=2)  # generation 1 complete, one game of the second
    _json(cli, "--db", "part.sqlite", "runs", "export", "1", "--out", "part.json.gz")
    assert _json(cli, "--db", "b.sqlite", "runs", "import", "part.json.gz")["status"] == "interrupted"
    resumed = _json(cli, "--db", "b.sqlite", "evolve", "--resume", "1")
    assert resumed["generations"] == whole["generations"]


def test_archives_that_cannot_be_imported_are_refused_with_nothing_written(shipped_ants, cli, tmp_path):
    _json(cli, "--db", "a.sqlite", "tournament", "--agents", AGENTS, "--matches", "2", *GAME)
    _json(cli, "--db", "a.sqlite", "runs", "export", "1", "--out", "t.json.gz")
    doc = json.loads(gzip.open("t.json.gz").read())

    def refused(name: str, body: bytes, words: str) -> None:
        (tmp_path / name).write_bytes(body)
        code, _, err = cli("--db", "b.sqlite", "runs", "import", name)
        assert code == 2 and words in err and "Traceback" not in err, err
        assert _json(cli, "--db", "b.sqlite", "runs") == []

    refused("plain.json.gz", b"not gzip at all", "is not a run archive")
    refused("other.json.gz", gzip.compress(b'{"format": "something else"}'), "is not a run archive")
    doc["payload"]["run"]["seed"] += 1
    refused("tampered.json.gz", gzip.compress(json.dumps(doc).encode()), "is damaged")
    doc["payload"]["run"]["seed"] -= 1
    doc["payload"]["versions"][0]["sha256"] = "0" * 64
    refused("foreign.json.gz", _signed(doc), "is not the version the run played")
    doc["payload"]["versions"][0]["agent"] = "nobody-here"
    refused("missing.json.gz", _signed(doc), "which this database does not hold")

    code, _, err = cli("--db", "a.sqlite", "runs", "export", "9", "--out", "x.json.gz")
    assert code == 2 and "no run with id 9" in err and not (tmp_path / "x.json.gz").exists()
    code, _, err = cli("--db", "a.sqlite", "runs", "export", "1", "--out", "x.json")
    assert code == 2 and "ending in .gz" in err
    tiny = ("--recipe", "paper", "--envs", "2", "--steps", "20", "--physics", "fast", "--epochs", "1",
            "--minibatches", "1", "--anneal", "2", "--iterations", "1")
    code, _, err = cli("--db", "a.sqlite", "train", "--body", "ant", "--name", "tiny-ant", *tiny)
    assert code == 0, err
    code, _, err = cli("--db", "a.sqlite", "runs", "export", "2", "--out", "x.json.gz")
    assert code == 2 and "stored versions of its own" in err and not (tmp_path / "x.json.gz").exists()


def test_the_trip_keeps_every_field_on_any_database(shipped_ants, cli, any_db_url):
    """Exported again from the database it was imported into (SQLite, or PostgreSQL with its own
    types and times with offsets), the archive is the same to the byte."""
    _json(cli, "--db", "a.sqlite", "tournament", "--agents", AGENTS, "--matches", "3", *GAME)
    _json(cli, "--db", "a.sqlite", "runs", "export", "1", "--out", "t.json.gz")
    run = _json(cli, "--db", any_db_url, "runs", "import", "t.json.gz")["id"]
    _json(cli, "--db", any_db_url, "runs", "export", str(run), "--out", "back.json.gz")
    assert open("back.json.gz", "rb").read() == open("t.json.gz", "rb").read()


def _reship_sparring_ant(shipped_ants, tmp_path) -> None:  # noqa: ANN001
    """Retire the shipped ``sparring-ant`` as ``old-sparring-ant`` and ship a new one under its name,
    with a version of the same number (7) and other weights."""
    import torch

    from sumo_cli.nets import policy as P
    from sumo_cli.nets.checkpoint import checkpoint_tensors, save_checkpoint
    from sumo_cli.nets.normalizer import new_stats
    from sumo_cli.store import shipped

    assert shipped.retire(shipped_ants, ["sparring-ant"], "old", "re-trained") == ["old-sparring-ant"]
    base = tmp_path / "run2" / "v00007"
    base.parent.mkdir(parents=True)
    spec = P.PolicySpec("mlp", 133, 8, features="ego")
    sha = save_checkpoint(base, checkpoint_tensors(P.init_params(spec, torch.Generator().manual_seed(8)), new_stats(133)),
                          spec, body="ant", strategy="none", metadata={"agent": "sparring-ant", "version": 7})
    shipped.ship(shipped_ants, "sparring-ant", "ant", "mlp", "none", [(7, base, sha, 7, 700)], {"command": "test"})


def test_an_archive_outlives_the_re_shipping_of_an_agent_it_played(shipped_ants, cli, tmp_path):
    """Retired before its name ships anew, an agent's versions stay shipped under a new name; an
    archive that played them imports with them (found by number and SHA-256), and a run resumed
    plays on with them, not with the new versions of the name."""
    from sumo_cli.errors import UserError
    from sumo_cli.store import shipped

    whole = _json(cli, "--db", "a.sqlite", "tournament", "--agents", AGENTS, "--matches", "4", *GAME)
    _json(cli, "--db", "a.sqlite", "runs", "export", "1", "--out", "t.json.gz")
    _json(cli, "--db", "part.sqlite", "tournament", "--agents", AGENTS, "--matches", "4", *GAME)
    _cut(tmp_path / "part.sqlite", 2)
    _json(cli, "--db", "part.sqlite", "runs", "export", "1", "--out", "part.json.gz")

    _reship_sparring_ant(shipped_ants, tmp_path)
    with pytest.raises(UserError, match="already shipped"):
        shipped.retire(shipped_ants, ["sparring-ant"], "old", "again")

    def players(db: str) -> set[str]:
        code, out, err = cli("--db", db, "matches", "--json")
        assert code == 0, err
        return {p for m in json.loads(out) for p in (m["a"], m["b"])}

    assert _json(cli, "--db", "b.sqlite", "runs", "import", "t.json.gz")["status"] == "finished"
    assert _json(cli, "--db", "b.sqlite", "runs", "show", "1")["results"]["leaderboard"] == whole["leaderboard"]
    assert players("b.sqlite") == {"ant-mlp@7", "old-sparring-ant@7:track"}
    retired = _json(cli, "--db", "b.sqlite", "agents", "show", "old-sparring-ant")
    assert retired["origin"]["retired"] == {"was": "sparring-ant", "why": "re-trained"}
    code, _, err = cli("--db", "b.sqlite", "report", "--out", "report")  # its players by their places in the run
    assert code == 0 and "sparring-ant@7:track" in (tmp_path / "report" / "report.md").read_text(), err

    assert _json(cli, "--db", "c.sqlite", "runs", "import", "part.json.gz")["status"] == "interrupted"
    assert _json(cli, "--db", "c.sqlite", "tournament", "--resume", "1")["leaderboard"] == whole["leaderboard"]
    assert players("c.sqlite") == {"ant-mlp@7", "old-sparring-ant@7:track"}  # the resumed games too


def test_a_resumed_tournament_plays_the_members_it_began_with_before_they_played(shipped_ants, cli, tmp_path):
    """A member that had not played yet when the run stopped is known by its checkpoint's SHA-256,
    which the run recorded at its start: re-shipped since under the same name and number, the
    resumed run still plays the version it began with (found under its retired name)."""
    whole = _json(cli, "--db", "a.sqlite", "tournament", "--agents", AGENTS, "--matches", "4", *GAME)
    _json(cli, "--db", "part.sqlite", "tournament", "--agents", AGENTS, "--matches", "4", *GAME)
    _cut(tmp_path / "part.sqlite", 0)
    _json(cli, "--db", "part.sqlite", "runs", "export", "1", "--out", "part.json.gz")
    _reship_sparring_ant(shipped_ants, tmp_path)

    assert _json(cli, "--db", "c.sqlite", "runs", "import", "part.json.gz")["status"] == "interrupted"
    assert _json(cli, "--db", "c.sqlite", "tournament", "--resume", "1")["leaderboard"] == whole["leaderboard"]
    code, out, err = cli("--db", "c.sqlite", "matches", "--json")
    assert code == 0, err
    assert {p for m in json.loads(out) for p in (m["a"], m["b"])} == {"ant-mlp@7", "old-sparring-ant@7:track"}
