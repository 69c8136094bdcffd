"""Benchmarks behind ``segmentstore bench``: each figure comes with a same-run baseline."""
