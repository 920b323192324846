"""Experiments and published benchmarks of the meta-learner (not part of the product package)."""
