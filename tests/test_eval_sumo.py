"""`sumo eval sumo` and the seeded bouts behind it: a learning curve of stored versions against a
motionless body, random actions and stored agents, under the faithful rules."""

from __future__ import annotations

import json

import pytest

from tests.test_train import TINY


def test_curve_of_a_small_run_json_plot_and_determinism(cli, tmp_path):
    assert cli("train", "--body", "ant", "--arch", "mlp", "--name", "tiny-ant", "--iterations", "2", *TINY)[0] == 0
    args = ("eval", "sumo", "tiny-ant", "--points", "3", "--bouts", "3", "--physics", "fast", "--seed", "4")
    code, out, err = cli(*args, "--json", "--plot", str(tmp_path / "curve.png"))
    assert code == 0, err
    doc = json.loads(out)
    assert [(r["version"], r["opponent"]) for r in doc["curve"]] == [
        (v, o) for v in (0, 1, 2) for o in ("motionless", "random")]
    for r in doc["curve"]:
        assert r["env_steps"] == r["version"] * 2 * 40
        assert r["win_rate"] + r["draw_rate"] + r["loss_rate"] == pytest.approx(1.0)
        assert len(r["episodes"]) == 3 and all(1 <= e["length"] <= 501 for e in r["episodes"])
    assert (tmp_path / "curve.png").stat().st_size > 10_000
    again = json.loads(cli(*args, "--json")[1])
    assert again["curve"] == doc["curve"]  # the same seed: the same bouts


@pytest.mark.parametrize("args, message", [
    (("--bouts", "0"), "--bouts must be at least 1"),
    (("--versions", "7"), "no version 7 stored"),
    (("--versions", "a,b"), "comma-separated version numbers"),
    (("--against", "nobody"), "unknown agent 'nobody'"),
    (("--plot", "curve.svg"), "PNG"),
])
def test_bad_input_is_one_sentence_and_exit_2(cli, tmp_path, args, message):
    assert cli("train", "--body", "ant", "--arch", "mlp", "--name", "tiny-ant", "--iterations", "1", *TINY)[0] == 0
    code, out, err = cli("eval", "sumo", "tiny-ant", "--bouts", "1", "--physics", "fast", *args)
    assert code == 2 and message in err, err
    assert not (tmp_path / "curve.svg").exists()


def test_zoo_ant_beats_a_motionless_ant_and_closes_in_faster_than_a_fresh_policy(zoo_dir, tmp_path):
    """The measure the learning-signal test relies on separates a trained agent from an untrained one."""
    import torch

    from sumo_cli.compete.bouts import MOTIONLESS, play_bouts, summary
    from sumo_cli.compete.game import AgentData
    from sumo_cli.store.library import import_zoo, load_agent
    from sumo_cli.nets import normalizer as nz
    from sumo_cli.nets import policy as P
    from sumo_cli.store.database import open_database

    d = open_database(str(tmp_path / "zoo.sqlite"))
    import_zoo(d, zoo_dir)
    zoo = AgentData.from_loaded(load_agent(d, "zoo-ant-mlp-v3"))
    d.dispose()
    spec = P.PolicySpec.from_dict(zoo.spec)
    fresh = AgentData("fresh", 0, "ant", "none", zoo.spec,
                      {k: v.numpy() for k, v in P.init_params(spec, torch.Generator().manual_seed(0)).items()},
                      {k: v.numpy() for k, v in nz.new_stats(spec.obs_dim).items()})
    trained = summary(play_bouts(zoo, MOTIONLESS, 12, seed=2))
    untrained = summary(play_bouts(fresh, MOTIONLESS, 12, seed=2))
    assert trained["win_rate"] >= 11 / 12 and untrained["win_rate"] <= 2 / 12
    assert trained["mean_steps_to_close"] < untrained["mean_steps_to_close"] - 20
