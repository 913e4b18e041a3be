"""Slow, independent reference implementations that tests and benchmarks check the product against.

They live beside the tests, not in the runtime packages: nothing the product runs needs them.
"""
