"""Helpers the benchmarks share (not benchmarks themselves: bench/*.py are)."""
