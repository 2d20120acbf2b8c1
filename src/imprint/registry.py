"""One generic registry: name -> object, entries given as objects or as lazy ``"module:attr"``.

Every lookup table of imprint (attacks, backend providers, model and data schemes, benchmarks) is
a :class:`Registry`. An entry is either the object itself or a ``"module:attr"`` reference that
is imported on first use, so a lookup imports only the module of the entry it asks for (and
nothing registers itself by being imported). A registry may name a Python entry-point *group*
(``imprint.attacks``, ``imprint.backends``, ``imprint.benchmarks``): installed distributions that
declare entry points in it are found once, when a name is missing or the registry is listed, and
each is loaded only when used. A plugin that fails to load is reported (a
:class:`PluginWarning`, and ``broken`` in :meth:`Registry.entries`), it never breaks a listing.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from imprint.errors import ConfigError

__all__ = ["BUILTIN", "Entry", "PluginWarning", "Registry", "import_ref"]

T = TypeVar("T")
BUILTIN = "built-in"


class PluginWarning(UserWarning):
    """A registry entry (usually an installed plugin) could not be loaded; it is left out."""


@dataclass(frozen=True)
class Entry:
    """What a listing says of one entry: where it comes from and whether it loads.

    ``origin`` is ``"built-in"``, ``"plugin DIST"`` (an entry point of the installed distribution
    DIST), ``"module M"`` (a class or function of module M added at run time) or ``"registered at
    run time"``; ``ref`` is the ``module:attr``
    of a lazy entry; ``broken`` is why it failed to load (None: loaded fine, or not tried yet).
    """

    name: str
    origin: str
    ref: str | None = None
    loaded: bool = False
    broken: str | None = None
    version: str | None = None  # a plugin's distribution version (for run manifests)


class _Slot:
    """A registry's entry: its value once loaded, else how to load it."""

    __slots__ = ("loader", "origin", "ref", "value", "loaded", "broken", "version")

    def __init__(
        self,
        origin: str,
        ref: str | None,
        loader: Callable[[], Any] | None,
        version: str | None = None,
    ) -> None:
        self.origin, self.ref, self.loader, self.version = origin, ref, loader, version
        self.value: Any = None
        self.loaded = False
        self.broken: str | None = None


def _split_ref(ref: str) -> tuple[str, str]:
    module_name, sep, attr = ref.partition(":")
    if not sep or not module_name.strip() or not attr.strip():
        raise ConfigError(f"reference {ref!r} is not 'module:attr', e.g. 'mypkg.attacks:MyAttack'")
    return module_name.strip(), attr.strip()


def import_ref(ref: str) -> Any:
    """The object a ``"module:attr"`` (or ``"module:attr.sub"``) reference names."""
    module_name, attr = _split_ref(ref)
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _origin_of(obj: Any) -> str:
    """``built-in`` for imprint's own classes and functions, else the module defining them."""
    module = str(getattr(obj, "__module__", "") or "") if hasattr(obj, "__qualname__") else ""
    if module == "imprint" or module.startswith("imprint."):
        return BUILTIN
    return f"module {module}" if module else "registered at run time"


def _matches(obj: Any, ref: str | None) -> bool:
    """Whether ``obj`` is what the lazy reference ``ref`` names (it is being imported now)."""
    if ref is None:
        return False
    module, _, attr = ref.partition(":")
    return getattr(obj, "__module__", None) == module and getattr(obj, "__qualname__", None) == attr


class Registry(Generic[T]):
    """Names -> objects of one kind (``kind`` names it in messages: ``"attack"``).

    ``group``: the entry-point group plugins register in (None: no plugins). ``check(name, obj)``
    validates a loaded object and returns it (raise :class:`ConfigError` to refuse it).
    ``sources`` are callables run once, with the entry points, before a full listing or when a
    name is missing (e.g. a scan that imports modules registering themselves). ``error`` is the
    exception class of lookups (``ConfigError``; ``DataError`` for data).
    """

    def __init__(
        self,
        kind: str,
        *,
        group: str | None = None,
        check: Callable[[str, Any], T] | None = None,
        sources: tuple[Callable[[], None], ...] = (),
        error: type[Exception] = ConfigError,
    ) -> None:
        self.kind, self.group, self.error = kind, group, error
        self._check = check
        self._sources = sources
        self._slots: dict[str, _Slot] = {}
        self._discovered = False

    # -- adding ------------------------------------------------------------------------------------
    def add(
        self, name: str, value: T | str, *, origin: str | None = None, force: bool = False
    ) -> None:
        """Add ``value`` (an object, or a lazy ``"module:attr"`` string: a string is always a
        reference) as ``name``.

        A name already taken raises unless ``force``, except that an object registering itself
        while its own lazy entry is being imported (``@register`` in that module) fills the entry.
        """
        slot = self._slots.get(name)
        if isinstance(value, str):
            if slot is not None and not force:
                raise self._duplicate(name, slot)
            _split_ref(value)
            self._slots[name] = _Slot(origin or BUILTIN, value, lambda: import_ref(value))
            return
        if slot is not None and not force:
            if slot.loaded or not _matches(value, slot.ref):
                raise self._duplicate(name, slot)
            slot.value, slot.loaded = self._checked(name, value), True  # filled in place
            return
        new = _Slot(origin or _origin_of(value), None, None)
        new.value, new.loaded = self._checked(name, value), True
        self._slots[name] = new

    def register(self, name: str, *, force: bool = False) -> Callable[[Any], Any]:
        """Decorator form of :meth:`add` (returns the object unchanged)."""

        def wrap(obj: Any) -> Any:
            self.add(name, obj, force=force)
            return obj

        return wrap

    def remove(self, name: str) -> None:
        """Drop ``name`` (tests, or a plugin replacing a built-in on purpose)."""
        self._slots.pop(name, None)

    def copy(self) -> Registry[T]:
        """An independent copy with the same entries (tests swap one in with monkeypatch)."""
        new: Registry[T] = Registry(
            self.kind, group=self.group, check=self._check, sources=self._sources, error=self.error
        )
        new._slots = dict(self._slots)
        new._discovered = self._discovered
        return new

    # -- looking up --------------------------------------------------------------------------------
    def __contains__(self, name: object) -> bool:
        if name in self._slots:
            return True
        self.discover()
        return name in self._slots

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def get(self, name: str) -> T:
        """The object registered as ``name``, imported now if lazy; unknown names raise
        ``error`` with the closest names, and an entry that fails to load raises saying why."""
        if name not in self:
            raise self.error(self.unknown_message(name))
        slot = self._slots[name]
        if not slot.loaded:
            self._load(name, slot)
        if slot.broken is not None:
            raise self.error(slot.broken)
        value: T = slot.value
        return value

    def names(self, *, sort: bool = True) -> list[str]:
        """Every registered name (plugins included, none loaded), sorted or in the order added."""
        self.discover()
        return sorted(self._slots) if sort else list(self._slots)

    def load_all(self, *, sort: bool = True) -> dict[str, T]:
        """Name -> object of every entry that loads; one that fails is warned of and left out."""
        out: dict[str, T] = {}
        for name in self.names(sort=sort):
            slot = self._slots.get(name)
            if slot is None:
                continue
            if not slot.loaded:
                self._load(name, slot)
                if slot.broken is not None:
                    warnings.warn(slot.broken, PluginWarning, stacklevel=2)
            if slot.broken is None:
                out[name] = slot.value
        return out

    def entries(self) -> list[Entry]:
        """Every entry, sorted, with its origin and, for one that failed to load, why."""
        self.discover()
        return [
            Entry(name, s.origin, s.ref, s.loaded and s.broken is None, s.broken, s.version)
            for name, s in sorted(self._slots.items())
        ]

    def origin(self, name: str) -> str:
        """Where ``name`` comes from (see :class:`Entry`)."""
        if name not in self:
            raise self.error(self.unknown_message(name))
        return self._slots[name].origin

    def unknown_message(self, name: str) -> str:
        """``unknown attack 'x'; did you mean ...? (known: ...)``."""
        known = self.names()
        close = difflib.get_close_matches(name, known, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return f"unknown {self.kind} {name!r}{hint} (known: {', '.join(known)})"

    # -- plugins -----------------------------------------------------------------------------------
    def discover(self) -> None:
        """Find the group's entry points and run the sources, once (nothing is loaded here)."""
        if self._discovered:
            return
        self._discovered = True
        for source in self._sources:
            source()
        if self.group is None:
            return
        for point in importlib.metadata.entry_points(group=self.group):
            self._add_entry_point(point)

    def _add_entry_point(self, point: importlib.metadata.EntryPoint) -> None:
        dist = getattr(point, "dist", None)
        origin = f"plugin {dist.name}" if dist is not None else "plugin (unknown distribution)"
        name = point.name
        if name in self._slots:
            slot = self._slots[name]
            if slot.origin == origin and slot.ref == point.value:
                return  # the same distribution found twice on sys.path
            taken = _Slot(origin, point.value, None)
            taken.loaded = True
            taken.broken = (
                f"{self.kind} {name!r} of {origin} (entry point {self.group}: {name} = "
                f"{point.value}) is left out: the name is already taken by {slot.origin}"
            )
            warnings.warn(taken.broken, PluginWarning, stacklevel=3)
            return
        self._slots[name] = _Slot(origin, point.value, point.load, dist and dist.version)

    # -- internals ---------------------------------------------------------------------------------
    def _load(self, name: str, slot: _Slot) -> None:
        assert slot.loader is not None
        try:
            obj = slot.loader()
        except Exception as err:  # a plugin's import may fail in any way; report, never crash
            slot.loaded, slot.broken = True, self._load_error(name, slot, err)
            return
        if slot.loaded:  # the import registered the object itself (``@register``)
            return
        try:
            slot.value = self._checked(name, obj)
        except ConfigError as err:
            slot.broken = f"{self.kind} {name!r} ({slot.origin}, {slot.ref}) is refused: {err}"
        slot.loaded = True

    def _checked(self, name: str, obj: Any) -> Any:
        return self._check(name, obj) if self._check is not None else obj

    def _load_error(self, name: str, slot: _Slot, err: Exception) -> str:
        module = (slot.ref or "").partition(":")[0]
        where = (
            f"entry point {self.group}: {name} = {slot.ref}" if slot.origin != BUILTIN else slot.ref
        )
        fix = (
            f"reinstall or fix {slot.origin.removeprefix('plugin ')}, or uninstall it"
            if slot.origin.startswith("plugin ")
            else f"check that module {module!r} imports"
        )
        return (
            f"{self.kind} {name!r} ({slot.origin}, {where}) failed to load: "
            f"{type(err).__name__}: {err}; {fix}"
        )

    def _duplicate(self, name: str, slot: _Slot) -> Exception:
        return ConfigError(
            f"{self.kind} {name!r} is already registered ({slot.origin}); pass force=True to "
            "replace it, or choose another name"
        )
