"""Numba kernels over plain arrays: they trust their input, so callers validate first."""
