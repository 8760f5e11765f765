"""Adapters to the services Omniflow talks to over HTTP (the Remnawave panel first).

Adapters speak HTTP and classify failures; they import neither models nor jobs,
so the worker decides what a failure means for an operation.
"""
