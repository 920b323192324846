"""`sumo bench env` at tiny settings: the structure of its figures, never their values (timings
depend on the machine; the command itself is what measures them)."""

from __future__ import annotations

import json
import math

import pytest

from sumo_cli.bench import env_bench as EB

RATIOS = ("env_over_raw", "play_speedup", "fast_over_faithful", "fast_env_over_raw")
RATES = ("raw_steps_per_s", "env_steps_per_s", "play_batched_steps_per_s", "play_naive_steps_per_s",
         "fast_env_steps_per_s", "fast_raw_steps_per_s")


def _check(doc: dict, pairings: list[str], batch_sizes: list[int]) -> None:
    assert set(doc) >= {"machine", "settings", "results", "summary", "seconds"}
    cpu = doc["machine"]["cpu"]
    assert isinstance(cpu["model"], str) and cpu["model"] and cpu["cores"] >= 1
    assert doc["settings"]["pairings"] == pairings and doc["settings"]["batch_sizes"] == batch_sizes
    rows = doc["results"]
    assert [(r["pairing"], r["batch"]) for r in rows] == [(p, n) for p in pairings for n in batch_sizes]
    for r in rows:
        assert r["body_a"] + "-" + r["body_b"] == r["pairing"]
        assert 1 <= r["threads"] <= r["batch"]
        for key in RATES + RATIOS:
            assert isinstance(r[key], float) and math.isfinite(r[key]) and r[key] > 0, (key, r[key])
    for key in RATIOS:
        s = doc["summary"][key]
        assert 0 < s["min"] <= s["median"] <= s["max"]


def test_measure_structure():
    settings = EB.BenchSettings.make(pairings=["ant-spider"], batch_sizes=[1, 2], steps=8, threads=2)
    doc = EB.measure(settings)
    _check(doc, ["ant-spider"], [1, 2])
    assert [r["threads"] for r in doc["results"]] == [1, 2]
    assert EB.render_table(doc).row_count == 2


def test_quick_defaults_and_pairing_names():
    quick = EB.BenchSettings.make(quick=True)
    assert quick.pairings == EB.QUICK_PAIRINGS and quick.batch_sizes == EB.QUICK_BATCH_SIZES
    assert len(EB.BenchSettings.make().pairings) == 6
    assert EB.parse_pairing("Bug-Spider") == ("bug", "spider")
    with pytest.raises(ValueError, match="bad pairing 'ant-cat'"):
        EB.parse_pairing("ant-cat")


def test_cli_json(cli):
    code, out, err = cli("bench", "env", "--json", "--threads", "1", "--pairings", "bug-bug",
                         "--batch-sizes", "2", "--steps", "4")
    assert code == 0, err
    doc = json.loads(out)
    _check(doc, ["bug-bug"], [2])
    assert doc["settings"]["threads"] == 1
    assert "CPU:" in err and "env/raw" in err


def test_cli_rejects_bad_options(cli):
    code, _, err = cli("bench", "env", "--pairings", "ant-cat")
    assert code == 2 and "bad pairing" in err
    code, _, err = cli("bench", "env", "--batch-sizes", "1,x")
    assert code == 2 and "--batch-sizes" in err
    code, _, err = cli("bench", "env", "--threads", "0")
    assert code == 2 and "--threads" in err


def test_every_column_says_its_unit():
    import io

    from rich.console import Console

    row = {key: 1234.5 for _, key in EB.TABLE_COLUMNS}
    row.update(pairing="ant-ant", batch=16, threads=2)
    doc = {"machine": {"cpu": {"model": "some CPU", "cores": 2}}, "results": [row]}
    buf = io.StringIO()
    Console(width=200, file=buf, color_system=None).print(EB.render_table(doc))
    out = buf.getvalue()
    for header, key in EB.TABLE_COLUMNS:
        if key in ("pairing", "threads"):
            continue  # a name and a count
        name, unit = header.split("\n")
        assert unit in ("bouts", "steps/s", "x"), header
    for words in ("steps/s: env steps per second", "x: the ratio"):
        assert words in " ".join(out.split())
