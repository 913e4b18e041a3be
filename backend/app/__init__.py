"""What people and machines start (entry floor): the CLI (``app.cli``, the ``domainbench`` command) and the
queue's worker (``app.worker``). The Python API is ``domainbench.api``; the UI is ``domainbench.frontend``."""
