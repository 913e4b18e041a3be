"""Internal errors: the traceback goes to a file, the terminal gets a short note saying so.

A user error (``UserInputError``) is one line and the user's to fix; anything else is a bug
in domainbench, and a bug report needs the whole traceback. Secrets the configuration knows
(the Mongo password, LLM API keys) are scrubbed from both, because the file is meant to be
attached to a public issue.
"""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import tempfile
import traceback
from datetime import datetime
from pathlib import Path

from domainbench.runtime.settings import Settings

CRASH_DIR = "crash-reports"  # under $DOMAINBENCH_HOME; the system temp dir when that fails
REPORT_HINT = "please report it on the domainbench issue tracker with that file attached"


def write_crash_report(exc: BaseException, settings: Settings, argv: list[str] | None = None) -> Path | None:
    """Write ``exc``'s traceback (redacted) to a new file and return its path, None if nowhere is writable."""
    lines = [
        f"domainbench {_version()} on Python {platform.python_version()} ({platform.platform()})",
        f"command: {' '.join(sys.argv if argv is None else argv)}",
        f"time: {datetime.now().isoformat(timespec='seconds')}",
        "",
        "".join(traceback.format_exception(exc)),
    ]
    text = settings.redact("\n".join(lines))
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    for folder in (settings.home / CRASH_DIR, Path(tempfile.gettempdir())):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f"domainbench-traceback-{stamp}-", suffix=".txt", dir=folder)
        except OSError:
            continue
        try:  # whole or not at all: a full disk must not leave an empty report behind
            with os.fdopen(fd, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            return Path(name).resolve()
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(name)
            continue
    return None


def internal_error_message(exc: BaseException, settings: Settings, report: Path | None) -> str:
    """What the terminal shows: what failed, that it is a bug, where the traceback is."""
    first = (str(exc).strip().splitlines() or [""])[0]
    what = settings.redact(f"{type(exc).__name__}: {first}" if first else type(exc).__name__)
    if len(what) > 200:
        what = what[:197] + "..."
    where = f"the full traceback is in {report}" if report else "the traceback could not be written to a file"
    return f"internal error: {what}\nThis is a bug in domainbench, not a problem with your input; {where};\n{REPORT_HINT}."


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("domainbench")
    except PackageNotFoundError:
        return "(source checkout)"
