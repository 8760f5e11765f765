"""One module per queue system benchmarked by ``python -m bench.queue``.

Each module follows the contract documented at the top of ``bench/harness.py``.
"""
