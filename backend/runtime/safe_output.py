"""Writing the files a user names with ``-o``: whole or not at all, and never onto something that is not a file.

The content goes to a temporary file beside the target, is flushed to disk, and is renamed over
the target, so an interrupted write (Ctrl-C, a full disk) leaves the old file or none, never half
of one. A symlink is written through: the link stays, its target gets the content. Device files,
FIFOs, sockets and directories are refused before anything is written (``UserInputError``, exit 2):
replacing ``/dev/null`` or blocking on a FIFO is never what ``-o`` meant.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from domainbench.errors import UserInputError

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str | None:
    return next((what for test, what in _KINDS if test(mode)), None)


def output_file(path: str | Path, option: str = "-o") -> Path:
    """The regular file that writing ``path`` will replace (a symlink's target), or UserInputError.

    ``option`` names the input in the message (``--output``, ``-o``).
    """
    path = Path(path)
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as e:
        raise UserInputError(f"{option} {path}: cannot be checked ({e.strerror}); choose another output file") from None
    if mode is not None and (what := _kind(mode)):
        raise UserInputError(f"{option} {path} is {what}, not a file; give a path to a regular file (nothing was written)")
    parent = target.parent
    if parent.exists() and not parent.is_dir():
        raise UserInputError(f"{option} {path}: {parent} is not a directory; choose another output file")
    return target


def output_dir(path: str | Path, option: str = "-o") -> Path:
    """A folder to write files into (made if missing), or UserInputError when ``path`` is something else."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        try:
            what = _kind(path.stat().st_mode) or "a file"
        except OSError:
            what = "not a folder"
        raise UserInputError(f"{option} {path} is {what}, not a folder; give a folder for the output (nothing was written)")
    for parent in path.parents:  # a file on the way (out.png/sheets) cannot become a folder
        if parent.exists() and not parent.is_dir():
            raise UserInputError(f"{option} {path}: {parent} is not a folder; choose another output folder")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserInputError(f"{option} {path}: cannot create the folder ({e.strerror}); choose another one") from None
    return path


def write_atomically(path: str | Path, data: str | bytes, option: str = "-o") -> Path:
    """Write ``data`` to ``path`` through a temporary file beside it and a rename; returns the file written.

    An existing file keeps its permissions; a new one gets the usual ``0o666 & ~umask``.
    """
    target = output_file(path, option)
    target.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode() if isinstance(data, str) else data
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target
