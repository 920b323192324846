"""`sumo bench train` (without --sb3): every architecture is compared with the raw physics measured
around it, in wall time and, with one worker, in CPU time; the ratios are the figures they name."""

from __future__ import annotations

import pytest


@pytest.mark.usefixtures("one_torch_thread")
def test_each_architecture_has_its_own_raw_reference_and_cpu_ratio():
    from sumo_cli.bench.train_bench import measure

    doc = measure("ant", "fast", envs=2, steps=6, iterations=2, archs=("mlp", "lstm"), workers=1)
    assert len(doc["raw_physics_each"]) == 3  # before the first architecture and after each
    for arch, r in doc["archs"].items():
        assert r["raw_physics"] > 0 and r["raw_physics_cpu"] > 0, arch
        assert r["iteration_over_raw"] == pytest.approx(r["iteration"] / r["raw_physics"], abs=2e-3)
        assert r["iteration_over_raw_cpu"] == pytest.approx(r["iteration_cpu"] / r["raw_physics_cpu"], abs=2e-3)
        # an iteration does the rollout and more: slower than collecting alone
        assert r["iteration"] < r["rollout"]
    walls = doc["raw_physics_each"]
    assert doc["archs"]["mlp"]["raw_physics"] == pytest.approx((walls[0] + walls[1]) / 2, abs=0.1)
    assert doc["archs"]["lstm"]["raw_physics"] == pytest.approx((walls[1] + walls[2]) / 2, abs=0.1)
