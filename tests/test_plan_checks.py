"""A population plan is checked whole before anything runs: every training step's options parsed by
`sumo train`'s own parser, a step that names itself refused, each failure one sentence naming the
step with exit 2 and nothing written; and each runner writes logs of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

HEADER = 'format = "sumo-population-plan"\nformat_version = 1\n'
OK = '[[steps]]\nname = "fine"\ntrain = "--body bug --arch mlp"\n'


def _plan(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "plan.toml"
    p.write_text(HEADER + OK + body)
    return p


@pytest.mark.parametrize("command", ["show", "train"])
@pytest.mark.parametrize("body, sentence", [
    ('[[steps]]\nname = "a"\ntrain = "--body ant --iterations abc"\n', "step a: --iterations must be a whole number"),
    ('[[steps]]\nname = "a"\ntrain = "--body ant --envs many"\n', "step a: `sumo train` does not take its options"),
    ('[[steps]]\nname = "a"\ntrain = "--body ant --bogus-opt 3"\n', "step a: `sumo train` does not take its options "
                                                                   "(No such option: --bogus-opt)"),
    ('[[steps]]\nname = "a"\ntrain = "--body ant --arch cnn"\n', "step a: unknown arch 'cnn'; choose one of mlp, lstm"),
    ('[[steps]]\nname = "a"\ntrain = "--body ant --strategy meta --teacher a"\n', "step a: --teacher names the step itself"),
    ('[[steps]]\nname = "a"\ntrain = "--body ant --help"\n', "step a: its train options ask for help"),
])
def test_a_step_the_train_command_would_refuse_is_refused_before_anything_runs(cli, tmp_path, command, body, sentence):
    code, out, err = cli("population", command, "--plan", _plan(tmp_path, body))
    flat = " ".join(err.split())
    assert code == 2 and sentence in flat and "Traceback" not in err, err
    assert out == "" and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "db").exists()  # nothing written: not even the database


def test_tournament_plan_refuses_a_bad_iterations_value_in_one_sentence(cli, tmp_path):
    code, _, err = cli("tournament", "--plan", _plan(tmp_path, '[[steps]]\nname = "a"\ntrain = "--body ant -n x"\n'))
    assert code == 2 and "step a: --iterations must be a whole number" in " ".join(err.split()), err


def test_each_runner_writes_its_logs_into_a_folder_of_its_own(cli, tmp_path, monkeypatch):
    # a step the parser takes but whose run fails at once (an opponent the database does not hold)
    monkeypatch.setenv("SUMO_CHECKPOINTS", str(tmp_path / "ckpt"))
    plan = tmp_path / "plan.toml"
    plan.write_text(HEADER + '[[steps]]\nname = "lost"\ntrain = "--body ant --arch mlp --strategy track '
                             '--opponents nobody-here"\n')
    logs = []
    for _ in range(2):
        code, _, err = cli("population", "train", "--plan", plan, "-j", "1")
        flat = " ".join(err.split())
        assert code == 2 and "plan step lost (exit 2; its log: " in flat, err
        logs.append(Path(flat.split("its log: ")[1].split(")")[0]))
    assert logs[0] != logs[1] and logs[0].parent.parent == logs[1].parent.parent == tmp_path / "ckpt" / "population-logs"
    for log in logs:  # each holds its own runner's one failure, the first one not overwritten nor appended to
        assert log.read_text().count("nobody-here") == 1, log.read_text()


def test_the_shipped_plan_passes_the_train_commands_parser(cli):
    code, out, err = cli("population", "show", "--json")  # the shipped plan, every step's options parsed
    assert code == 0 and "Traceback" not in err, err


def test_a_tournament_on_a_partial_plan_says_that_shipped_agents_fill_the_rest(cli, tmp_path, monkeypatch):
    repo = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("SUMO_POLICIES", str(repo / "policies"))
    code, _, err = cli("train", "--body", "ant", "--arch", "mlp", "--name", "t-ant", "--recipe", "paper", "--envs", "2",
                       "--steps", "40", "--physics", "fast", "--epochs", "1", "--minibatches", "1", "--iterations", "1")
    assert code == 0, err
    plan = tmp_path / "partial.toml"
    plan.write_text(HEADER + '[[steps]]\nname = "t-ant"\nmember = "ant-mlp"\ntrain = "--body ant --arch mlp"\n')
    code, _, err = cli("tournament", "--plan", plan, "--bodies", "ant", "--kinds", "mlp-none,lstm-none", "--matches", "1",
                       "--rounds", "1", "--episodes", "1", "--physics", "fast", "-j", "1")
    flat = " ".join(err.split())
    assert code == 0, err
    assert "1 worker;" in flat and "1 workers" not in flat  # the run's header, in words
    assert ("the plan fills 1 of the population's 2 agents; the other 1 are the database's agents of their canonical "
            "names (ant-lstm: the shipped ones") in flat, flat
