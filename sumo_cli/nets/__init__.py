"""Policies and value functions as pure functions of a parameter dict, the observation normaliser,
checkpoints (safetensors + JSON, SHA-256 verified) and the importer for the original RoboSumo zoo.

Imports torch, numpy and safetensors only: no database, no CLI, no MuJoCo.
"""

from sumo_cli.nets.policy import (
    PolicySpec,
    entropy,
    forward,
    forward_sequence,
    init_params,
    initial_state,
    log_prob,
    param_shapes,
    rl2_input,
    sample,
    stack_params,
    unstack_params,
)

__all__ = [
    "PolicySpec",
    "entropy",
    "forward",
    "forward_sequence",
    "init_params",
    "initial_state",
    "log_prob",
    "param_shapes",
    "rl2_input",
    "sample",
    "stack_params",
    "unstack_params",
]
