"""Training from scratch shows a learning signal under the faithful rules within a few minutes.

An Ant is trained by PPO against a motionless Ant with the recipe docs/lab-record.md describes
(a potential-based approach reward, the outcome weighted 0.1 from the start, a facing start, fast
physics) for 80 iterations (328k env steps), then it and its untrained start play the same 24
seeded bouts under the faithful physics, rules and rewards, from the facing start. The trained
agent must get clearly closer to its opponent (a margin beyond three standard errors of the
difference) and win more bouts. The untrained policy drifts: it lacks both.
"""

from __future__ import annotations

import json
import math
import statistics

import pytest

pytestmark = pytest.mark.slow

RECIPE = ["--recipe", "paper", "--body", "ant", "--arch", "mlp", "--physics", "fast", "--approach-coef", "5", "--push-coef", "0",
          "--move-coef", "0", "--control-coef", "0.02", "--anneal-start", "0.9", "--anneal", "100000",
          "--face-opponent", "--motionless-iterations", "100000", "--init-logstd", "-1"]


def test_a_few_minutes_of_training_close_in_and_win_more(cli):
    code, out, err = cli("train", *RECIPE, "--name", "signal-ant", "--iterations", "80", "--seed", "4", "-j", "2", "--json")
    assert code == 0, err
    code, out, err = cli("eval", "sumo", "signal-ant", "--versions", "0,80", "--against", "motionless", "--bouts", "24",
                         "--face-opponent", "--seed", "0", "--json")
    assert code == 0, err
    before, after = json.loads(out)["curve"]
    assert (before["version"], after["version"]) == (0, 80)

    def mean_se(row: dict) -> tuple[float, float]:
        d = [e["min_dist"] for e in row["episodes"]]
        return statistics.mean(d), statistics.stdev(d) / math.sqrt(len(d))

    (m0, s0), (m1, s1) = mean_se(before), mean_se(after)
    assert m0 - m1 > 3 * math.hypot(s0, s1), f"closest approach {m0:.2f} +- {s0:.2f} m before, {m1:.2f} +- {s1:.2f} after"
    assert after["win_rate"] > before["win_rate"] + 0.1
