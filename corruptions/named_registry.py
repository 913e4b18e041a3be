"""``Registry``: the one pattern behind corruptions, model backends, dataset kinds and planner providers.

Named entries; a duplicate name is rejected unless ``replace=True`` is explicit; an unknown name
raises the owner's error type with the close names; ``names("open_clip:*")`` lists with shell
wildcards. Built-in entries and plug-ins arrive the same way: on first use the registry imports
its built-in modules, then loads the entry points of its group (e.g. ``domainbench.corruptions``), and
hands every loaded object to the owner's ``adopt`` hook, which registers what it finds.

This module lives in the leaf ``corruptions`` package so the corruption library can use it
without importing ``backend``; the backend's registries import it from here.
"""

from __future__ import annotations

import difflib
import fnmatch
import importlib
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any, Generic, TypeVar

T = TypeVar("T")

# adopt(registry, loaded_object, origin, name): register what a built-in module or plug-in provides.
Adopt = Callable[["Registry[Any]", Any, str, str], None]


def _adopt_as_entry(registry: Registry[Any], obj: Any, origin: str, name: str) -> None:
    """Default hook: a built-in module registers itself on import; a plug-in object is the entry."""
    if isinstance(obj, ModuleType):
        return
    if registry.entry_type is not None and not isinstance(obj, registry.entry_type):
        raise registry.error(f"{origin} gave {type(obj).__name__}; expected a {registry.entry_type.__name__} or a module")
    registry.register(name, obj, origin=origin)


class Registry(Generic[T]):
    """Named entries of one kind (see the module docstring).

    ``kind`` names an entry in messages ("corruption", "model backend"); ``error`` is the
    exception type raised for unknown names, duplicates and broken plug-ins; ``normalise`` maps a
    user's spelling to the canonical key (tried when the name as given is unknown); ``listing``
    tells the user where to see every name; ``entry_type`` is what a plug-in object must be
    (checked by the default ``adopt``); ``optional_builtins`` are built-in modules that may
    be absent from an installation (only the module itself missing is tolerated, never one of
    its own imports).
    """

    def __init__(
        self,
        kind: str,
        *,
        error: type[Exception] = LookupError,
        group: str | None = None,
        builtins: Sequence[str] = (),
        optional_builtins: Sequence[str] = (),
        adopt: Adopt = _adopt_as_entry,
        normalise: Callable[[str], str] | None = None,
        listing: str = "",
        entry_type: type | None = None,
    ) -> None:
        self.kind = kind
        self.entry_type = entry_type
        self.error = error
        self.group = group
        self.builtins = tuple(builtins)
        self.optional_builtins = tuple(optional_builtins)
        self.adopt = adopt
        self.normalise = normalise
        self.listing = listing
        self._entries: dict[str, T] = {}
        self._origins: dict[str, str] = {}
        self._broken: dict[str, str] = {}  # plug-in name -> why it did not load
        self._lock = threading.RLock()
        # *_started guards against re-entry from the thread that loads (a module being imported
        # registers, a plug-in looks a name up); *_done lets other threads skip the lock after it
        self._builtins_started = self._builtins_done = False
        self._plugins_started = self._plugins_done = False
        # what is being loaded now: entries registered while a module imports belong to it
        self._loading: str | None = None

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {len(self._entries)} entries, group={self.group!r})"

    # -- registration ------------------------------------------------------------------------
    def register(self, name: str, entry: T, *, replace: bool = False, origin: str = "") -> T:
        """Add ``entry`` under ``name``; returns the entry. Re-registering the same object is a no-op.

        The built-ins are loaded first, so a clash with one is reported here and not at some
        later look-up (a clash with a plug-in is reported when the plug-ins load, naming it).
        """
        if not isinstance(name, str) or not name:
            raise self.error(f"a {self.kind} name must be a non-empty string, got {name!r}")
        self.load_builtins()
        with self._lock:
            old = self._entries.get(name)
            if old is not None and old is not entry and not replace:
                by = self._origins.get(name) or "an earlier registration"
                new_by = f" by {origin}" if origin else ""
                raise self.error(
                    f"{self.kind} {name!r} is already registered (by {by}); the second registration{new_by} "
                    "was refused: pick another name, or pass replace=True to override it"
                )
            self._entries[name] = entry
            self._origins[name] = origin or self._loading or "register()"
        return entry

    def unregister(self, name: str) -> None:
        """Remove ``name`` if present (plug-in development and tests)."""
        with self._lock:
            self._entries.pop(name, None)
            self._origins.pop(name, None)

    # -- look-up -----------------------------------------------------------------------------
    def get(self, name: str) -> T:
        """The entry called ``name``; an unknown name raises ``error`` naming the close matches."""
        key = self.resolve(name)
        if key is None:
            raise self.error(self.unknown_message(name))
        return self._entries[key]

    def resolve(self, name: str) -> str | None:
        """The canonical key of ``name`` (as given, else normalised), or None when unknown."""
        if not isinstance(name, str):
            raise self.error(f"a {self.kind} name must be a string, got {type(name).__name__}")
        self.load()
        if name in self._entries:
            return name
        if self.normalise is not None:
            key = self.normalise(name)
            if key in self._entries:
                return key
        return None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.resolve(name) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self.load()
        return len(self._entries)

    def names(self, pattern: str = "*") -> list[str]:
        """Registered names matching a shell wildcard (``*``, ``?``, ``[abc]``), sorted."""
        self.load()
        return sorted(n for n in self._entries if fnmatch.fnmatchcase(n, pattern))

    def items(self) -> list[tuple[str, T]]:
        self.load()
        return sorted(self._entries.items())

    def origin(self, name: str) -> str:
        """Where ``name`` came from: a built-in module, an entry point or ``register()``."""
        key = self.resolve(name)
        if key is None:
            raise self.error(self.unknown_message(name))
        return self._origins[key]

    def close_matches(self, name: str, candidates: Iterable[str] | None = None, n: int = 4, cutoff: float = 0.5) -> list[str]:
        """Registered names (or ``candidates``) that look like ``name``, compared case-insensitively."""
        by_lower = {c.lower(): c for c in (self.names() if candidates is None else candidates)}
        return [by_lower[c] for c in difflib.get_close_matches(name.lower(), list(by_lower), n=n, cutoff=cutoff)]

    def unknown_message(self, name: str) -> str:
        close = self.close_matches(name)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        if self.listing:
            tail = f" ({self.listing} for all {len(self._entries)})"
        else:
            known = sorted(self._entries)
            tail = f" (known: {', '.join(known[:20])}{', ...' if len(known) > 20 else ''})" if known else f" (no {self.kind} is registered)"
        broken = "".join(f"; plug-in {p!r} failed to load: {why}" for p, why in sorted(self._broken.items()))
        return f"unknown {self.kind} {name!r}{hint}{tail}{broken}"

    # -- built-ins and plug-ins --------------------------------------------------------------
    def load(self) -> None:
        """Import the built-in modules, then the entry-point plug-ins (each once, lazily)."""
        if self._builtins_done and self._plugins_done:
            return
        with self._lock:
            self.load_builtins()
            if self._plugins_started:
                return
            self._plugins_started = True
            try:
                # every plug-in gets its chance; the first broken one is then reported
                group = entry_points(group=self.group) if self.group else ()
                problems = [p for ep in group if (p := self._load_entry_point(ep))]
            finally:
                self._plugins_done = True
            if problems:
                raise problems[0]

    def load_builtins(self) -> None:
        if self._builtins_done:
            return
        with self._lock:
            if self._builtins_started:
                return
            self._builtins_started = True
            try:
                for module in self.builtins + self.optional_builtins:
                    self._load_builtin(module)
            finally:
                self._builtins_done = True

    def _load_builtin(self, module: str) -> None:
        origin = f"built-in module {module}"
        self._loading = origin
        try:
            self.adopt(self, importlib.import_module(module), origin, module.rpartition(".")[2])
        except ModuleNotFoundError as exc:
            if not (module in self.optional_builtins and exc.name == module):
                raise
        finally:
            self._loading = None

    def load_module(self, module: Any, origin: str, name: str = "") -> None:
        """Register what an already imported module (or any plug-in object) provides."""
        self.load_builtins()
        self.adopt(self, module, origin, name)

    def _load_entry_point(self, ep: EntryPoint) -> Exception | None:
        """Load one plug-in; a failure comes back as the error to raise, naming the plug-in."""
        dist = getattr(getattr(ep, "dist", None), "name", None)
        where = f"{self.kind} plug-in {ep.name!r} ({ep.value}{f', from {dist}' if dist else ''})"
        origin = f"entry point {ep.name!r}"
        self._loading = origin
        try:
            self.adopt(self, ep.load(), origin, ep.name)
        except Exception as exc:  # a broken plug-in must say which one it is
            self._broken[ep.name] = f"{type(exc).__name__}: {exc}"
            error = self.error(f"could not load {where}: {exc}; fix or uninstall that package")
            error.__cause__ = exc
            return error
        finally:
            self._loading = None
        return None

    def reset_plugins(self) -> None:
        """Forget the entry-point plug-ins and load them again on next use (tests, after installs)."""
        with self._lock:
            for name in [n for n, o in self._origins.items() if o.startswith("entry point ")]:
                self.unregister(name)
            self._broken.clear()
            self._plugins_started = self._plugins_done = False


__all__ = ["Adopt", "Registry"]
