"""distrl benchmarks: every pipeline stage measured against its own ceiling, in one run.

Run `make bench` (or `python benchmarks/run.py --help`); see benchmarks/README.md.
"""
