"""`sumo bench env`: throughput of the simulation against raw MuJoCo, on this machine."""

from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console

from sumo_cli.cli.common import err_console, friendly, print_json, require_positive
from sumo_cli.errors import UserError
from sumo_cli.vocabulary import check_physics

app = typer.Typer(help="Measure throughput on this machine.", no_args_is_help=True)


def _csv(text: Optional[str]) -> list[str] | None:
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    return items or None


@app.command("env")
@friendly
def env(
    quick: bool = typer.Option(False, "--quick", help="Fewer pairings, batch sizes and steps (about a minute)."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON on stdout."),
    threads: Optional[int] = typer.Option(
        None, "--threads", help="Physics threads (raw MuJoCo gets the same); default: the usable cores."
    ),
    pairings: Optional[str] = typer.Option(
        None, "--pairings", help="Comma-separated body pairings, e.g. ant-ant,bug-spider (default: all six)."
    ),
    batch_sizes: Optional[str] = typer.Option(
        None, "--batch-sizes", help="Comma-separated batch sizes (default: 1,16,64; --quick: 1,16)."
    ),
    steps: Optional[int] = typer.Option(
        None, "--steps", help="Env steps per measurement, summed over the batch (default 2000; --quick 600)."
    ),
) -> None:
    """Batched env vs raw MuJoCo, batched vs one-bout-at-a-time play, fast vs faithful physics."""
    from sumo_cli.bench import env_bench as EB

    if threads is not None:
        require_positive(threads, "--threads")
    if steps is not None:
        require_positive(steps, "--steps")
    pair_list = _csv(pairings)
    for p in pair_list or []:
        try:
            EB.parse_pairing(p)
        except ValueError as exc:
            raise UserError(str(exc)) from None
    try:
        sizes = [int(x) for x in _csv(batch_sizes) or []] or None
    except ValueError:
        raise UserError(f"--batch-sizes takes comma-separated whole numbers, got {batch_sizes!r}") from None
    for n in sizes or []:
        require_positive(n, "each batch size")
    settings = EB.BenchSettings.make(quick=quick, pairings=pair_list, batch_sizes=sizes, steps=steps,
                                     threads=threads)
    cpu = EB.cpu_info()
    err_console.print(f"CPU: {cpu['model']} ({cpu['cores']} usable cores)", highlight=False)
    doc = EB.measure(settings, progress=lambda msg: err_console.print(f"  {msg}", style="dim", highlight=False))
    # the table needs ~110 columns; a terminal gets its own width, a pipe or file a wide one
    wide = err_console if err_console.is_terminal else Console(stderr=True, width=120)
    wide.print(EB.render_table(doc))
    sm = doc["summary"]
    err_console.print(
        f"env/raw {sm['env_over_raw']['min']:.2f}-{sm['env_over_raw']['max']:.2f}, "
        f"batched play x{sm['play_speedup']['min']:.1f}-{sm['play_speedup']['max']:.1f} over one bout at a time, "
        f"fast/faithful {sm['fast_over_faithful']['median']:.2f} (median), "
        f"fast env/raw {sm['fast_env_over_raw']['min']:.2f}-{sm['fast_env_over_raw']['max']:.2f} "
        f"({sm['env_over_raw']['over']}); {doc['seconds']:.0f} s",
        highlight=False,
    )
    if json_out:
        print_json(doc)


@app.command("train")
@friendly
def train(
    sb3: bool = typer.Option(
        False, "--sb3", help="Compare with Stable-Baselines3 PPO on the same task (needs the optional extra 'compare': pip install stable-baselines3)."
    ),
    quick: bool = typer.Option(False, "--quick", help="One batch per learner (under about a minute)."),
    json_out: bool = typer.Option(False, "--json", help="Print the figures as JSON on stdout."),
    steps: Optional[int] = typer.Option(
        None, "--steps",
        help="Env steps per learner, updates included, rounded up to whole batches "
             "(--sb3: default 49152, --quick 4096; otherwise: default 2 iterations of --envs x 512).",
    ),
    workers: Optional[int] = typer.Option(
        None, "--workers", help="Our trainer's rollout processes (default: --sb3 min(cores, 2), otherwise 1)."
    ),
    body: str = typer.Option("ant", "--body", help="The learner's body (ant, bug, spider); the opponent's too."),
    physics: str = typer.Option("faithful", "--physics", help="faithful (RK4) or fast (implicitfast)."),
    archs: Optional[str] = typer.Option(
        None, "--archs", help="Without --sb3: comma-separated architectures (default mlp,lstm; --quick mlp)."
    ),
    envs: int = typer.Option(8, "--envs", help="Without --sb3: bout slots per iteration."),
) -> None:
    """Training env steps/s against raw physics of the same model; with --sb3, also against SB3 PPO."""
    import math
    import os

    from sumo_cli.sim.bodies import body_spec

    try:
        body_spec(body)
    except (KeyError, ValueError) as exc:
        raise UserError(str(exc).strip("'\"")) from None
    check_physics(physics)
    if steps is not None:
        require_positive(steps, "--steps")
    if workers is not None:
        require_positive(workers, "--workers")
    require_positive(envs, "--envs")
    cores = len(os.sched_getaffinity(0))
    if sb3:
        from sumo_cli.bench import sb3_compare as SC

        if not SC.sb3_available():
            raise UserError(SC.INSTALL_HINT)
        w = workers or min(cores, 2)
        budget = steps or (SC.QUICK_STEPS if quick else 49152)
        err_console.print(f"CPU: {SC._machine()['cpu']['model']} ({cores} usable cores)", highlight=False)
        doc = SC.compare(budget, body, physics, w, quick=quick and steps is None,
                         progress=lambda msg: err_console.print(f"  {msg}", style="dim", highlight=False))
        err_console.print(SC.summary_line(doc), highlight=False)
    else:
        from sumo_cli.bench import train_bench as TB

        arch_list = _csv(archs) or (["mlp"] if quick else ["mlp", "lstm"])
        for a in arch_list:
            if a not in ("mlp", "lstm"):
                raise UserError(f"--archs takes mlp and/or lstm, got {a!r}")
        per_iteration = envs * 512
        iterations = max(2, math.ceil(steps / per_iteration)) if steps else 2
        err_console.print(f"  {iterations} iterations of {per_iteration} env steps per architecture", style="dim",
                          highlight=False)
        try:
            doc = TB.measure(body, physics, envs, 512, iterations, tuple(arch_list), workers or 1, min(2, envs))
        except ValueError as exc:
            raise UserError(str(exc)) from None
        for a, r in doc["archs"].items():
            cpu = f"; in CPU time {r['iteration_over_raw_cpu']:.2f}" if "iteration_over_raw_cpu" in r else ""
            err_console.print(
                f"{a}: {r['iteration']:,.0f} env steps/s per iteration (updates included), "
                f"{r['rollout']:,.0f} collecting; raw physics {r['raw_physics']:,.0f}: "
                f"{r['iteration_over_raw']:.2f} / {r['rollout_over_raw']:.2f} of it{cpu}",
                highlight=False,
            )
    if json_out:
        print_json(doc)
