"""sumo: continuous adaptation via meta-learning in competitive RoboSumo."""

__version__ = "0.1.0"
