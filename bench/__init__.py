"""Benchmarks for Omniflow. Not application code: nothing outside bench/ imports it.

``python -m bench.queue`` compares Omniflow's job queue with peer queue systems.
"""
