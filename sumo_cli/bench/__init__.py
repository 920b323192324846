"""Throughput measurements (run as modules: ``python -m sumo_cli.bench.train_bench``)."""
