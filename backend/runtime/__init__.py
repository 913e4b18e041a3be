"""The process's runtime (ground floor): the settings reader, user text and whole-or-nothing output files,
resource bounds, free disk and host memory, the parent watch, crash reports and the workers' heartbeat.
Nothing of the package above ``domainbench.errors`` is imported here."""
