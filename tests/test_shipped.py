"""The agents shipped in policies/: registered in every database, checked by hash, and able to fight
(they win faithful bouts from the standard start against a motionless Ant)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from sumo_cli.store import shipped
from sumo_cli.errors import UserError
from sumo_cli.nets import policy as P
from sumo_cli.nets.checkpoint import checkpoint_tensors, save_checkpoint
from sumo_cli.nets.normalizer import new_stats
from sumo_cli.store.database import Database


def _fake_run_checkpoint(tmp_path: Path, version: int) -> tuple[Path, str]:
    spec = P.PolicySpec("mlp", 133, 8, features="ego")
    params = P.init_params(spec, torch.Generator().manual_seed(version))
    base = tmp_path / "run" / f"v{version:05d}"
    base.parent.mkdir(parents=True, exist_ok=True)
    sha = save_checkpoint(base, checkpoint_tensors(params, new_stats(133)), spec, body="ant", strategy="none",
                          metadata={"agent": "trained-ant", "version": version})
    return base, sha


@pytest.fixture
def policies(tmp_path: Path, monkeypatch) -> Path:  # noqa: ANN001
    folder = tmp_path / "policies"
    versions = []
    for v in (3, 7):
        base, sha = _fake_run_checkpoint(tmp_path, v)
        versions.append((v, base, sha, v, 100 * v))
    shipped.ship(folder, "ant-mlp", "ant", "mlp", "none", versions, {"command": "sumo train --body ant", "seed": 1},
                 default_version=7)
    monkeypatch.setenv("SUMO_POLICIES", str(folder))
    return folder


def test_a_new_database_registers_the_shipped_agents_once(policies, tmp_path):
    from sumo_cli.store.library import load_agent

    manifest = json.loads((policies / "manifest.json").read_text())
    assert [a["name"] for a in manifest["agents"]] == ["ant-mlp"]
    assert manifest["total_bytes"] == sum(p.stat().st_size for p in policies.rglob("*.*") if p.name != "manifest.json")
    db = Database(f"sqlite:///{tmp_path / 'a.sqlite'}")
    assert shipped.register_shipped(db) == ["ant-mlp"]
    assert shipped.register_shipped(db) == []  # already there
    agent = load_agent(db, "ant-mlp")
    assert agent.version == 7 and agent.spec.features == "ego" and agent.metadata["agent"] == "trained-ant"
    assert load_agent(db, "ant-mlp@3").version == 3


def test_a_database_made_before_an_agent_was_reshipped_sees_the_new_shipping(policies, tmp_path):
    from sumo_cli.store.library import load_agent

    db = Database(f"sqlite:///{tmp_path / 'a.sqlite'}")
    assert shipped.register_shipped(db) == ["ant-mlp"]
    first7 = load_agent(db, "ant-mlp@7").params
    versions = []
    for v, seed_from in ((7, 70), (9, 9)):  # version 7 retrained (other weights), version 9 new; 3 dropped
        base, sha = _fake_run_checkpoint(tmp_path / f"again{v}", seed_from)
        versions.append((v, base, sha, v, 100 * v))
    shipped.ship(policies, "ant-mlp", "ant", "mlp", "none", versions, {"command": "sumo train --body ant", "seed": 2},
                 default_version=9)
    assert shipped.register_shipped(db) == ["ant-mlp"]
    assert shipped.register_shipped(db) == []
    assert load_agent(db, "ant-mlp").version == 9
    again7 = load_agent(db, "ant-mlp@7").params
    assert any(not torch.equal(first7[k], again7[k]) for k in first7)
    assert load_agent(db, "ant-mlp@3").version == 3  # no longer shipped, still registered while its file is there
    for f in policies.glob("ant-mlp/v00003.*"):
        f.unlink()  # pruned (scripts/ship_population.py): forgotten, so no training run draws it as an opponent
    assert shipped.register_shipped(db) == ["ant-mlp"]
    assert shipped.register_shipped(db) == []
    with pytest.raises(UserError, match="no version 3"):
        load_agent(db, "ant-mlp@3")


def test_a_tampered_shipped_file_is_refused(policies, tmp_path):
    from sumo_cli.store.library import load_agent

    db = Database(f"sqlite:///{tmp_path / 'b.sqlite'}")
    shipped.register_shipped(db)
    f = policies / "ant-mlp" / "v00007.safetensors"
    data = bytearray(f.read_bytes())
    data[-1] ^= 1
    f.write_bytes(bytes(data))
    with pytest.raises(UserError, match="SHA-256|sha256|hash"):
        load_agent(db, "ant-mlp")


def test_a_users_own_agent_of_the_same_name_is_left_alone(policies, tmp_path):
    from sumo_cli.store import registry

    db = Database(f"sqlite:///{tmp_path / 'c.sqlite'}")
    with db.write() as s:
        registry.create_agent(s, "ant-mlp", "ant", "mlp", "none", "trained", {"run_id": 99})
    assert shipped.register_shipped(db) == []
    with db.read() as s:
        assert registry.get_agent(s, "ant-mlp").provenance == "trained"


def test_shipped_agents_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("SUMO_POLICIES", "")
    assert shipped.policies_dir() is None and shipped.read_manifest() == []


def test_shipping_refuses_a_file_that_does_not_match_its_hash(tmp_path):
    base, sha = _fake_run_checkpoint(tmp_path, 1)
    with pytest.raises(ValueError, match="SHA-256"):
        shipped.ship(tmp_path / "p", "x", "ant", "mlp", "none", [(1, base, "0" * 64, 1, 1)], {})


# --- the real shipped agents ------------------------------------------------------------------

REPO_POLICIES = Path(__file__).resolve().parents[1] / "policies"
SHIPPED = shipped.read_manifest(REPO_POLICIES)
#: Bouts of the final stage against a motionless Ant, as it plays in games (adapting between rounds
#: of 3); the population's bars (>= 85% of >= 96 bouts) are measured in docs/population.md.
ROUNDS = 4


def _fresh_db(tmp_path: Path, monkeypatch) -> Database:  # noqa: ANN001
    monkeypatch.setenv("SUMO_POLICIES", str(REPO_POLICIES))
    db = Database(f"sqlite:///{tmp_path / 'd.sqlite'}")
    shipped.register_shipped(db)
    return db


@pytest.mark.slow
@pytest.mark.skipif(not SHIPPED, reason="policies/ ships no agent yet")
# the measured agents: the population (learning opponents and candidates ship without a measured rate)
@pytest.mark.parametrize("name", [a.name for a in SHIPPED if "quality" in a.provenance])
def test_shipped_agents_fight_a_motionless_ant_as_measured(name, tmp_path, monkeypatch):
    """A few seeded faithful bouts from the reference start, played as in games (adaptive agents
    adapting between rounds), won as often as the manifest says the agent wins them: inside the
    two-sided 99.9% range of a binomial with the measured rate (its 96 bouts of
    docs/population.md), so a broken load, policy or physics shows in either direction."""
    from scipy.stats import binom

    from sumo_cli.compete.game import AgentData, FixedOpponent, GameSettings, play_game
    from sumo_cli.store.library import load_agent

    agent = next(a for a in SHIPPED if a.name == name)
    measured = agent.provenance["quality"]["bars"]["motionless-ant"]["rate"]
    db = _fresh_db(tmp_path, monkeypatch)
    a = AgentData.from_loaded(load_agent(db, name))
    result = play_game(a, FixedOpponent("motionless", "ant"), GameSettings(rounds=ROUNDS, episodes=3), seed=2026)
    won = sum(e.outcome == "win" for rd in result.rounds for e in rd.episodes)
    n = 3 * ROUNDS
    low, high = binom.ppf(0.0005, n, measured), binom.ppf(0.9995, n, measured)
    assert low <= won <= high, f"{name} won {won} of {n} bouts against a motionless Ant; measured {measured:.1%}"


@pytest.mark.slow
@pytest.mark.timeout(1800)  # every shipped version plays: its time grows with what ships (a guard, not a timing)
@pytest.mark.skipif(not SHIPPED, reason="policies/ ships no agent yet")
def test_every_shipped_version_loads_checked_and_plays(tmp_path, monkeypatch):
    """Every version in the manifest loads (its SHA-256 checked) and plays a round against a motionless
    body of another kind, with its own strategy."""
    from sumo_cli.compete.game import AgentData, FixedOpponent, GameSettings, play_game
    from sumo_cli.store.library import load_agent

    db = _fresh_db(tmp_path, monkeypatch)
    played = 0
    for agent in SHIPPED:
        for v in agent.versions:
            loaded = load_agent(db, f"{agent.name}@{v.version}")
            assert loaded.strategy == agent.strategy
            other = "bug" if agent.body == "ant" else "ant"
            result = play_game(AgentData.from_loaded(loaded), FixedOpponent("motionless", other),
                               GameSettings(rounds=2, episodes=1), seed=v.version)
            assert len(result.rounds) == 2
            played += 1
    assert played == sum(len(a.versions) for a in SHIPPED)


@pytest.mark.skipif(not SHIPPED, reason="policies/ ships no agent yet")
def test_a_fresh_database_holds_the_papers_population_of_105(tmp_path, monkeypatch):
    from collections import Counter

    from sumo_cli.compete.population import paper_population

    members = paper_population(_fresh_db(tmp_path, monkeypatch))
    assert len(members) == 105 and len({m.name for m in members}) == 105
    assert Counter(m.kind for m in members) == {k: 15 for k in
                                                ("mlp-none", "mlp-track", "mlp-meta", "lstm-none", "lstm-track", "lstm-meta", "lstm-rl2")}
    assert Counter(m.body for m in members) == {"ant": 35, "bug": 35, "spider": 35}
    total = sum(p.stat().st_size for p in REPO_POLICIES.rglob("*.safetensors"))
    # policies/ about 130 MB in all: tracking agents share their sibling's files, learning opponents are
    # float16; earlier plans' re-trained agents stay for the archives that played them (pop1-* and pop2-*,
    # 27 MB; pop4-* and the pop3- LSTMs, played by the third population's tournament) and as the measured
    # alternatives of the lab record (pop3-* and pop5-*, 15 MB in all); each further re-trained slot keeps
    # its earlier versions (under 2 MB)
    assert total < 135e6


def test_every_command_sees_the_shipped_agents_on_a_fresh_database(policies, cli):
    code, out, err = cli("agents", "--json")
    assert code == 0, err
    listed = json.loads(out)
    names = [a["name"] for a in (listed["agents"] if isinstance(listed, dict) else listed)]
    assert "ant-mlp" in names


def test_a_policies_folder_that_is_not_there_is_named(cli, monkeypatch, tmp_path):
    monkeypatch.setenv("SUMO_POLICIES", "/nonexistent")
    code, out, err = cli("agents")
    assert code == 2 and "SUMO_POLICIES=/nonexistent: the folder /nonexistent does not exist" in " ".join(err.split())
    monkeypatch.setenv("SUMO_POLICIES", str(tmp_path))
    code, out, err = cli("agents")
    assert code == 2 and "holds no manifest.json" in err



def _promote(policies: Path, step_options: str, *extra: str) -> int:
    import importlib.util

    plan = policies / "population.toml"
    plan.write_text('format = "sumo-population-plan"\nformat_version = 1\n'
                    '[[steps]]\nname = "pop9-bug-mlp"\nmember = "bug-mlp"\ntrain = "--body bug --arch mlp"\n'
                    '[[steps]]\nname = "pop9-ant-mlp"\n'
                    f'member = "ant-mlp"\ntrain = "{step_options}"\n')
    spec = importlib.util.spec_from_file_location("promote_agent", Path(__file__).resolve().parents[1] / "scripts" / "promote_agent.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main(["candidate", "--step", "pop9-ant-mlp", "--to", str(policies), *extra])


@pytest.fixture
def candidate(policies: Path, tmp_path: Path) -> Path:
    """``policies`` with a candidate shipped beside the population: trained by seed 3 for 9
    iterations, its final shipped version the 7th."""
    shipped.retire(policies, ["ant-mlp"], "old", "a candidate takes its slot")
    base, sha = _fake_run_checkpoint(tmp_path, 7)
    shipped.ship(policies, "candidate", "ant", "mlp", "none", [(7, base, sha, 7, 700)],
                 {"command": "sumo train ...", "config": {"body": "ant", "arch": "mlp", "strategy": "none", "seed": 3,
                                                          "alpha_init": 0.5, "opponents": ["a", "b"], "iterations": 9,
                                                          "teacher": "bug-mlp@40"}},
                 default_version=7)
    return policies


def test_a_candidate_promoted_into_the_population_is_its_plan_step_done_from_shipped(candidate: Path, capsys):
    from sumo_cli.runs.population_plan import load_plan
    from sumo_cli.runs.population_shipped import shipped_steps

    before = {a.name: a for a in shipped.read_manifest(candidate)}["candidate"]
    assert _promote(candidate, "--body ant --arch mlp --seed 3 --opponents a,b --iterations 7") == 0
    agents = {a.name: a for a in shipped.read_manifest(candidate)}
    assert "candidate" not in agents and not (candidate / "candidate").exists()
    member = agents["ant-mlp"]
    assert [(v.version, v.sha256) for v in member.versions] == [(v.version, v.sha256) for v in before.versions]
    assert member.provenance["plan_step"]["name"] == "pop9-ant-mlp" and member.provenance["shipped_as"] == "candidate"
    assert member.provenance["command"] == "sumo train ..."  # how it was trained stays
    assert all(v.path.parent == candidate / "ant-mlp" and v.path.with_suffix(".safetensors").is_file() for v in member.versions)
    assert shipped_steps(load_plan(candidate / "population.toml"))["pop9-ant-mlp"].iterations == 7


def test_a_step_naming_a_plan_step_matches_a_run_that_named_its_member(candidate: Path, capsys):
    assert _promote(candidate, "--body ant --arch mlp --seed 3 --teacher pop9-bug-mlp@40 --iterations 7") == 0
    assert {a.name: a for a in shipped.read_manifest(candidate)}["ant-mlp"].provenance["shipped_as"] == "candidate"


@pytest.mark.parametrize("options, why", [
    ("--body ant --arch mlp --seed 4 --iterations 7", "--seed 4 (trained with 3)"),
    ("--body ant --arch mlp --seed 3 --iterations 9", "--iterations 9 (its final shipped version is 7"),
    ("--body ant --arch mlp --seed 3 --alpha-init=0.1 --iterations 7", "--alpha-init 0.1 (trained with 0.5)"),
    ("--body ant --arch mlp --seed 3 --teacher none --iterations 7", "--teacher none (trained with bug-mlp@40)"),
    ("--body ant --arch mlp --seed 3 --teacher pop9-bug-mlp@30 --iterations 7", "--teacher bug-mlp@30 (trained with bug-mlp@40)"),
    ("--body ant --arch mlp --seed 3 --init-from x --iterations 7", "--init-from (its run recorded no init_from)"),
    ("--body ant --arch mlp --seed 3 --opponents a --iterations 7", "--opponents a (trained with a,b)"),
])
def test_a_candidate_trained_otherwise_than_the_step_says_is_refused_and_nothing_moves(candidate: Path, options, why,
                                                                                       capsys):
    manifest = (candidate / "manifest.json").read_text()
    assert _promote(candidate, options) == 2
    assert why in capsys.readouterr().out
    assert (candidate / "manifest.json").read_text() == manifest and (candidate / "candidate").is_dir()


def test_retiring_an_agent_renames_the_games_measured_against_its_versions(policies: Path, tmp_path: Path):
    """A slot's quality names its cross-body opponents ``name@version``: once ``name`` is retired,
    those versions ship as ``<prefix>-name``, and the games say so (an adaptive slot's ``unadapted``
    twin too); games against other agents keep their keys."""
    base, sha = _fake_run_checkpoint(tmp_path / "other", 5)
    game = {"won": 1, "drawn": 0, "lost": 2, "bouts": 3}
    quality = {"agent": "ant-lstm@5", "games": {
        "ant-mlp@7": game, "ant-mlp@7 unadapted": game, "bug-lstm@160": game, "random": game}}
    shipped.ship(policies, "ant-lstm", "ant", "mlp", "none", [(5, base, sha, 5, 500)], {"quality": quality})
    shipped.retire(policies, ["ant-mlp"], "old", "re-trained")
    after = {a["name"]: a for a in json.loads((policies / "manifest.json").read_text())["agents"]}
    assert set(after["ant-lstm"]["provenance"]["quality"]["games"]) == {
        "old-ant-mlp@7", "old-ant-mlp@7 unadapted", "bug-lstm@160", "random"}
    assert after["ant-lstm"]["provenance"]["quality"]["agent"] == "ant-lstm@5"
