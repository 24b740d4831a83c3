"""Benchmark workloads: each module exposes run(scale) and DESCRIPTION.

scale 1.0 is tuned so that the unprofiled run takes roughly 0.3-1 s on a slow
shared machine; --quick runs use a smaller scale.
"""
