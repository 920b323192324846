"""`sumo bench env`: how close the batched environment comes to raw MuJoCo, and what batching buys.

For every body pairing and batch size, measured in one run on this machine (env steps per second,
every bout counted):

(a) ``env``: :class:`BatchedSumo` stepped with uniform random actions (physics, observations,
    rewards, rules, resets), against ``raw``: :func:`raw_physics_steps_per_second`, mujoco.rollout
    of the same model on the same number of native threads with no Python between steps. Their
    ratio ``env_over_raw`` is the share of the machine's physics speed the environment delivers.
(b) ``play``: the environment plus both agents' policy calls, with zoo-sized LSTM policies
    (random parameters from :func:`sumo_cli.nets.policy.init_params`, the zoo's sizes, observation
    normalisation and action sampling included). ``batched``: one policy call per agent per step
    for the whole batch; ``naive``: one bout at a time, one batch-1 call per agent per step (what a
    loop over single environments does). Their ratio is ``play_speedup``.
(c) ``fast``: (a) again with the "fast" physics option (implicitfast), as ``fast_over_faithful``
    (env against env) and ``fast_env_over_raw`` (against raw MuJoCo of the fast model).

Timed sections follow a warm-up; torch runs on one thread (the policy calls are small, and extra
torch threads would only compete with the physics threads). ``steps`` is the number of env steps
(summed over the batch) each measurement runs; more is steadier, fewer is quicker.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from dataclasses import dataclass
from typing import Callable

BODY_NAMES = ("ant", "bug", "spider")
PAIRINGS = ("ant-ant", "bug-bug", "spider-spider", "ant-bug", "ant-spider", "bug-spider")
BATCH_SIZES = (1, 16, 64)
STEPS = 2000
QUICK_PAIRINGS = ("ant-ant", "bug-spider")
QUICK_BATCH_SIZES = (1, 16)
QUICK_STEPS = 600
MIN_STEPS = 20          # per bout and measurement, whatever the batch size
HIDDEN = 64             # the zoo's LSTM width


def parse_pairing(text: str) -> tuple[str, str]:
    """"ant-bug" -> ("ant", "bug"); ValueError naming the bodies otherwise."""
    parts = text.strip().lower().split("-")
    if len(parts) != 2 or not all(p in BODY_NAMES for p in parts):
        raise ValueError(f"bad pairing {text!r}: expected <body>-<body> with bodies {', '.join(BODY_NAMES)}")
    return parts[0], parts[1]


def cpu_info() -> dict:
    """The CPU model (from /proc/cpuinfo where there is one) and the usable core count."""
    model = None
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.lower().startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return {"model": model or platform.processor() or platform.machine() or "unknown",
            "cores": cores, "logical_cpus": os.cpu_count()}


class _Agent:
    """A zoo-sized LSTM policy acting for a batch of bouts: normalise, one policy call, sample."""

    def __init__(self, obs_dim: int, act_dim: int, n: int, seed: int):
        import torch

        from sumo_cli.nets import normalizer as nz
        from sumo_cli.nets import policy as P

        self.torch, self.P, self.clip = torch, P, nz.CLIP
        gen = torch.Generator().manual_seed(seed)
        self.spec = P.PolicySpec(arch="lstm", obs_dim=obs_dim, act_dim=act_dim, hidden=HIDDEN)
        self.params = P.init_params(self.spec, gen)
        stats = nz.update(nz.new_stats(obs_dim), torch.randn(64, obs_dim, generator=gen, dtype=torch.float64))
        mean, std = nz.mean_std(stats)
        self.mean, self.std = mean.float(), std.float()
        self.state = P.initial_state(self.spec, n)
        self.gen = gen

    def __call__(self, obs):
        torch, P = self.torch, self.P
        with torch.no_grad():
            x = torch.clamp((torch.from_numpy(obs).float() - self.mean) / self.std, -self.clip, self.clip)
            mean, self.state = P.policy_mean(self.spec, self.params, x, self.state)
            return P.sample(mean, self.params["logstd"], self.gen).numpy().astype("float64")

    def reset(self, done) -> None:
        if done.any():
            self.state = self.P.reset_state(self.state, self.torch.from_numpy(done))


def play_steps_per_second(body_a: str, body_b: str, n_envs: int, n_steps: int, n_threads: int,
                          physics: str = "faithful", seed: int = 0) -> float:
    """Env steps per second of n_envs bouts played by two zoo-sized LSTM policies, one batched
    policy call per agent per step (n_envs=1 is the naive loop: one bout at a time)."""
    from sumo_cli.sim.sumo_env import BatchedSumo

    env = BatchedSumo(body_a, body_b, n_envs, physics=physics, seed=seed, n_threads=n_threads)
    try:
        agent_a = _Agent(env.obs_size_a, env.n_actions_a, n_envs, seed + 1)
        agent_b = _Agent(env.obs_size_b, env.n_actions_b, n_envs, seed + 2)
        obs_a, obs_b = env.observe()

        def one_step():
            nonlocal obs_a, obs_b
            r = env.step(agent_a(obs_a), agent_b(obs_b))
            agent_a.reset(r.done)
            agent_b.reset(r.done)
            obs_a, obs_b = r.obs_a, r.obs_b

        for _ in range(2):   # warm-up
            one_step()
        t0 = time.perf_counter()
        for _ in range(n_steps):
            one_step()
        return n_envs * n_steps / (time.perf_counter() - t0)
    finally:
        env.close()


def env_steps_per_second(body_a: str, body_b: str, n_envs: int, n_steps: int, n_threads: int,
                         physics: str = "faithful", seed: int = 0) -> tuple[float, float]:
    """(batched env, raw MuJoCo) env steps per second for one pairing, batch size and physics."""
    from sumo_cli.sim.sumo_env import BatchedSumo, batched_steps_per_second, raw_physics_steps_per_second

    env = BatchedSumo(body_a, body_b, n_envs, physics=physics, seed=seed, n_threads=n_threads)
    try:
        model = env.model
        env_rate = batched_steps_per_second(env, n_steps=n_steps, seed=seed)
    finally:
        env.close()
    raw_rate = raw_physics_steps_per_second(model, n_envs, n_threads, n_steps=n_steps, seed=seed)
    return env_rate, raw_rate


@dataclass
class BenchSettings:
    pairings: tuple[str, ...] = PAIRINGS
    batch_sizes: tuple[int, ...] = BATCH_SIZES
    steps: int = STEPS
    threads: int | None = None
    quick: bool = False

    @classmethod
    def make(cls, quick: bool = False, pairings=None, batch_sizes=None, steps=None, threads=None) -> "BenchSettings":
        return cls(
            pairings=tuple(pairings) if pairings else (QUICK_PAIRINGS if quick else PAIRINGS),
            batch_sizes=tuple(batch_sizes) if batch_sizes else (QUICK_BATCH_SIZES if quick else BATCH_SIZES),
            steps=int(steps) if steps else (QUICK_STEPS if quick else STEPS),
            threads=threads, quick=quick,
        )


def _r(x: float, nd: int = 3) -> float:
    return round(float(x), nd)


def measure(settings: BenchSettings | None = None, progress: Callable[[str], None] | None = None) -> dict:
    """Run the benchmark; returns one JSON-able dict (see the module docstring)."""
    import mujoco
    import torch

    from sumo_cli.runtime.threads import torch_threads
    from sumo_cli.sim.sumo_env import default_threads

    s = settings or BenchSettings()
    pairs = [parse_pairing(p) for p in s.pairings]
    for n in s.batch_sizes:
        if int(n) < 1:
            raise ValueError(f"batch sizes must be at least 1, got {n}")
    threads = s.threads or default_threads(1 << 30)
    say = progress or (lambda msg: None)
    t_start = time.perf_counter()
    results = []
    with torch_threads(1):
        for body_a, body_b in pairs:
            pairing = f"{body_a}-{body_b}"
            say(f"{pairing}: naive play (one bout at a time)")
            naive_steps = max(MIN_STEPS, s.steps // 4)
            naive = play_steps_per_second(body_a, body_b, 1, naive_steps, 1)
            for n in s.batch_sizes:
                n = int(n)
                t = min(threads, n)
                n_steps = max(MIN_STEPS, s.steps // n)
                say(f"{pairing}: batch {n}, {t} thread{'s' if t > 1 else ''}")
                env_rate, raw_rate = env_steps_per_second(body_a, body_b, n, n_steps, t, "faithful")
                play = play_steps_per_second(body_a, body_b, n, n_steps, t)
                fast_env, fast_raw = env_steps_per_second(body_a, body_b, n, n_steps, t, "fast")
                results.append({
                    "pairing": pairing, "body_a": body_a, "body_b": body_b, "batch": n, "threads": t,
                    "steps_per_bout": n_steps,
                    "raw_steps_per_s": _r(raw_rate, 1), "env_steps_per_s": _r(env_rate, 1),
                    "env_over_raw": _r(env_rate / raw_rate),
                    "play_batched_steps_per_s": _r(play, 1), "play_naive_steps_per_s": _r(naive, 1),
                    "play_speedup": _r(play / naive),
                    "fast_env_steps_per_s": _r(fast_env, 1), "fast_raw_steps_per_s": _r(fast_raw, 1),
                    "fast_over_faithful": _r(fast_env / env_rate),
                    "fast_env_over_raw": _r(fast_env / fast_raw),
                })

    def summary(key: str) -> dict:
        big = [r[key] for r in results if r["batch"] >= 16]
        vals = big or [r[key] for r in results]
        return {"min": min(vals), "median": _r(statistics.median(vals)), "max": max(vals),
                "over": "batch >= 16" if big else "all batch sizes"}

    return {
        "machine": {"cpu": cpu_info(), "python": platform.python_version(), "mujoco": mujoco.__version__,
                    "torch": torch.__version__, "load_average": [round(x, 2) for x in os.getloadavg()]},
        "settings": {"quick": s.quick, "pairings": [f"{a}-{b}" for a, b in pairs],
                     "batch_sizes": [int(n) for n in s.batch_sizes], "steps": s.steps, "threads": threads,
                     "physics": "faithful (fast in the fast_* columns)", "policy": f"lstm {HIDDEN} (zoo sizes)"},
        "results": results,
        "summary": {key: summary(key) for key in
                    ("env_over_raw", "play_speedup", "fast_over_faithful", "fast_env_over_raw")},
        "seconds": _r(time.perf_counter() - t_start, 1),
    }


# (header with its unit, result key); a ratio "x" compares two throughputs measured in the same run
TABLE_COLUMNS = [
    ("pairing", "pairing"), ("batch\nbouts", "batch"), ("threads\n", "threads"),
    ("raw\nsteps/s", "raw_steps_per_s"), ("env\nsteps/s", "env_steps_per_s"), ("env/raw\nx", "env_over_raw"),
    ("play\nsteps/s", "play_batched_steps_per_s"), ("naive\nsteps/s", "play_naive_steps_per_s"),
    ("play/naive\nx", "play_speedup"), ("fast env\nsteps/s", "fast_env_steps_per_s"),
    ("fast/env\nx", "fast_over_faithful"), ("fast/raw\nx", "fast_env_over_raw"),
]
TABLE_CAPTION = (
    "steps/s: env steps per second, summed over the batch. raw: MuJoCo's own rollout of the same model; "
    "env: sumo's batched environment (random actions); play: env + both agents' policies, one batched call "
    "per agent per step; naive: one bout at a time; fast: implicitfast physics. x: the ratio of the two."
)


def render_table(doc: dict):
    """A Rich table of the figures (env steps per second) and ratios."""
    from rich import box
    from rich.table import Table

    cpu = doc["machine"]["cpu"]
    table = Table(title=f"{cpu['model']}, {cpu['cores']} cores; faithful physics unless 'fast'",
                  box=box.SIMPLE_HEAD, pad_edge=False, caption=TABLE_CAPTION)
    for title, _ in TABLE_COLUMNS:
        table.add_column(title, justify="left" if title == "pairing" else "right", no_wrap=True)
    cols = TABLE_COLUMNS
    for r in doc["results"]:
        cells = []
        for _, key in cols:
            v = r[key]
            cells.append(f"{v:,.0f}" if key.endswith("_per_s") else (f"{v:.2f}" if isinstance(v, float) else str(v)))
        table.add_row(*cells)
    return table
