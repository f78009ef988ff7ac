"""Benchmarks, kept apart from the solver: instance-library runs and replays of published protocols (openb)."""
