"""kickserver's benchmark suite: `python -m bench [NAME ...] [--quick]`; see bench/__main__.py.

Benchmarks (each a module here with NAME, run(opts) and table(payload)): train (train_speed.py),
sampling, osc (latency.py), controls, quality, flops, custom. bench/gpu.py measures a GPU in one call;
`python -m bench.report` turns bench/results/*.json into BENCHMARKS.md.
"""
