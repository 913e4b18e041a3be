"""Text from the user or the store shown as it is: run ids, domain texts, class and file names.

Such text can hold console markup (``[/b]``, ``[red]``) that rich would interpret (or fail on),
and control characters (escape sequences, carriage returns, bidirectional overrides) that would
rewrite the terminal or hide what is shown. Everything printed passes through one of these.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from rich.markup import escape
from rich.text import Text

# invisible characters that reorder or hide text ("Trojan source"); category Cf, but unlike
# most of Cf (soft hyphen, zero-width joiners in emoji) they change what a reader sees
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _escaped(ch: str) -> str:
    code = ord(ch)
    if 0xDC80 <= code <= 0xDCFF:  # surrogateescape's stand-in for an undecodable byte: show the byte
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, newlines: bool = False) -> str:
    """``text`` with every control character (newlines and tabs too) written as its escape, ``\\x1b``.

    A lone surrogate (a non-UTF-8 file name decoded with ``surrogateescape``) becomes its escape too.
    ``newlines``: keep line breaks (a multi-line message), escape the rest.
    """
    s = str(text)
    if newlines:
        return "\n".join(printable(line) for line in s.split("\n"))
    if s.isprintable():  # the common case, without a per-character loop
        return s
    return "".join(_escaped(ch) if ch in _BIDI or unicodedata.category(ch) in ("Cc", "Cs") else ch for ch in s)


def undecodable_escaped(s: str) -> str:
    """``s`` with each undecodable byte of a name (a lone surrogate from ``surrogateescape``) as its ``\\xNN``."""
    return "".join(_escaped(ch) if 0xDC80 <= ord(ch) <= 0xDCFF else ch for ch in s)


def data_safe(text: str, terminal: bool) -> str:
    """Exported text (CSV/JSON rows) as it may be written: an undecodable byte of a file name (a lone
    surrogate, which UTF-8 cannot encode) as its ``\\xNN`` escape; for a ``terminal`` stream (stdout) also
    every control and bidi character but the line breaks and tabs that structure the rows."""
    if text.isprintable() or (not terminal and text.isascii()):
        return text
    if not terminal:
        return undecodable_escaped(text) if any(0xD800 <= ord(ch) <= 0xDFFF for ch in text) else text
    keep = "\n\r\t"
    return "".join(ch if ch in keep or not (ch in _BIDI or unicodedata.category(ch) in ("Cc", "Cs")) else _escaped(ch)
                   for ch in text)


class SafeWriter:
    """A text stream that passes everything written through :func:`data_safe`."""

    def __init__(self, stream: Any, terminal: bool) -> None:
        self._stream, self._terminal = stream, terminal

    def write(self, text: str) -> int:
        self._stream.write(data_safe(text, self._terminal))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def markup_safe(text: object) -> str:
    """``text`` for a rich string that also holds markup: printable, and its brackets escaped."""
    return escape(printable(text))


def literal(text: object, style: str = "") -> Text:
    """``text`` as a rich ``Text`` (never parsed for markup), printable: for table cells."""
    return Text(printable(text), style=style)
