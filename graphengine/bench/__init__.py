"""Benchmarks behind ``graphengine bench``: each prints a table, then one JSON line."""
