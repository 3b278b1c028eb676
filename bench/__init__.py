"""kickserver's benchmark suite: `python -m bench [NAME ...] [--quick]`; see bench/__main__.py.

Benchmarks (each a module here with NAME, run(opts) and table(payload)): train (train_speed.py),
sampling, osc (latency.py), controls, quality, flops, custom. bench/gpu.py measures a GPU in one call;
`python -m bench.report` turns the JSON into a BENCHMARKS.md. Every writer defaults to ~/.cache/kickserver/bench
(bench.common.user_results); the repository's figures are bench/results/*.json and docs/img/*.png, written only
when asked (--out bench/results --img docs/img). One-off investigations live in bench/studies/.
"""
