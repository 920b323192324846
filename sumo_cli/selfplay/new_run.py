"""How the options of a new RoboSumo training run become its :class:`TrainConfig`: the named recipe's
values (by default the strategy's recipe), then the options given. One function, asked by ``sumo
train`` and by a population plan, so that a plan step means what its ``sumo train`` child does."""

from __future__ import annotations

from sumo_cli.selfplay.recipes import default_recipe, recipe_values
from sumo_cli.selfplay.train_config import TrainConfig

DEFAULT_ARCH = "lstm"


def run_identity(body: str, arch: str | None = None, strategy: str | None = None) -> tuple[str, str, str]:
    """(body, arch, strategy) of a new run, lower-cased, with the defaults filled in."""
    return body.strip().lower(), (arch or DEFAULT_ARCH).strip().lower(), (strategy or "none").strip().lower()


def new_run_config(fields: dict, *, body: str, arch: str | None = None, strategy: str | None = None,
                   recipe: str | None = None) -> TrainConfig:
    """The settings of a new run: ``recipe`` (default: the strategy's) for ``body``, overridden by
    ``fields`` (TrainConfig field names; values already typed). Unknown recipes are a ValueError."""
    body, arch, strategy = run_identity(body, arch, strategy)
    kw = recipe_values((recipe or default_recipe(strategy)).strip().lower(), body)
    kw.update(fields)
    kw.update(body=body, arch=arch, strategy=strategy)
    return TrainConfig(**kw)
