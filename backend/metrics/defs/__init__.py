"""Metric declarations, one ``METRICS`` tuple per module, collected by :mod:`domainbench.metrics.registry`.

To add a metric: declare a :class:`~domainbench.metrics.registry.Metric` in the ``METRICS`` of the
module of its family (or in a new module here: every module of this package is read), give it an
``order`` among the metrics of its level, and test its value. The CLI summary, the exports, the
UI's tables and glossary and ``domainbench metrics`` pick it up from the registry.
"""
