"""The attack registry: name -> attack class (a :class:`~imprint.registry.Registry`).

The built-in attacks are lazy ``module:attr`` entries (:data:`BUILTIN_ATTACKS`): asking for
``loss`` imports :mod:`imprint.attacks.loss` only. Installed packages add attacks through the
entry-point group ``imprint.attacks`` (``name = "package.module:AttackClass"``); a module dropped
into this package that registers itself with :func:`register` is found by a scan, run once,
when a name is missing or the attacks are listed. :func:`register` stays the way user code and
tests add an attack at run time.

Kept apart from :mod:`imprint.attacks.base` (building attacks by name) and
:mod:`imprint.attacks.params` (parameter checks), which both use it, so that neither imports the
other; it checks entries against :class:`~imprint.attacks.contract.Attack` (the contract, below
all three). A class with no scoring hook (a typo such as ``score_signal``) or
malformed ``summary``/``paper``/``deviations`` is refused here, in one line, so ``imprint
attacks`` lists it as broken instead of a run crashing after its model work.
It holds classes as plain ``type``; :mod:`imprint.attacks.base` re-exports these names typed as
``type[Attack]``.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import pkgutil
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from imprint.attacks.contract import Attack
from imprint.errors import ConfigError
from imprint.registry import Entry, PluginWarning, Registry

__all__ = [
    "ATTACKS",
    "BUILTIN_ATTACKS",
    "GROUP",
    "attack_entries",
    "available_attacks",
    "get_attack_class",
    "register",
]

C = TypeVar("C", bound=type)
GROUP = "imprint.attacks"

#: name -> where the built-in attack class lives (imported on first use)
BUILTIN_ATTACKS = {
    name: f"imprint.attacks.{module}:{cls}"
    for name, module, cls in (
        ("acmia", "acmia", "Acmia"),
        ("camia", "camia", "CAMIA"),
        ("con_recall", "con_recall", "ConRecall"),
        ("dc_pdd", "dc_pdd", "DcPdd"),
        ("de_cop", "de_cop", "DECOP"),
        ("ez_mia", "ez_mia", "EzMia"),
        ("gap_k", "gap_k", "GapK"),
        ("gradnorm", "gradnorm", "GradNorm"),
        ("informia", "informia", "InfoRMIA"),
        ("lira", "lira", "LiRA"),
        ("loss", "loss", "Loss"),
        ("lowercase", "lowercase", "Lowercase"),
        ("min_k", "min_k", "MinK"),
        ("min_k_pp", "min_k_pp", "MinKPlusPlus"),
        ("min_k_pp_topk", "min_k_pp_topk", "MinKPlusPlusTopK"),
        ("neighborhood", "neighborhood", "Neighborhood"),
        ("ngram_coverage", "ngram_coverage", "NGramCoverage"),
        ("pac", "pac", "Pac"),
        ("petal", "petal", "PETAL"),
        ("probe", "probe", "Probe"),
        ("qmia", "qmia", "QMIA"),
        ("ramia", "ramia", "RaMIA"),
        ("recall", "recall", "Recall"),
        ("ref", "ref", "Reference"),
        ("rmia", "rmia", "RMIA"),
        ("samia", "samia", "SaMIA"),
        ("simmia", "simmia", "SimMIA"),
        ("surp", "surp", "Surp"),
        ("tag_tab", "tag_tab", "TagTab"),
        ("wbc", "wbc", "Wbc"),
        ("zlib", "zlib", "Zlib"),
    )
}


#: a name ``--attacks a,b`` and ``--param NAME.FIELD=VALUE`` can carry
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def _check_attack(name: str, obj: Any) -> type[Any]:
    """A loaded entry must be an Attack subclass; it takes the name it is registered under."""
    if not _NAME.fullmatch(name):
        raise ConfigError(
            f"attack name {name!r} must start with a letter and hold only letters, digits, _ "
            "and - (it is written in --attacks a,b and --param NAME.FIELD=VALUE), e.g. 'my_attack'"
        )
    if not (isinstance(obj, type) and issubclass(obj, Attack)):
        raise ConfigError(
            f"attack {name!r} must be a subclass of imprint.attacks.Attack, got {obj!r}"
        )
    _refuse_old_score_hook(name, obj)
    _refuse_missing_score_hook(name, obj)
    _refuse_bad_class_attributes(name, obj)
    obj.name = name  # the column it writes; a subclass of a registered attack gets its own
    return obj


def _refuse_old_score_hook(name: str, cls: type[Any]) -> None:
    """The previous release's recipe overrode ``score(self, signals)``; ``score`` now receives
    :class:`~imprint.attacks.contract.ScoringInputs`, so such a class would crash inside the run
    (``'ScoringInputs' object has no attribute 'get'``). Refused here, saying what to rename."""
    owner = next(c for c in cls.__mro__ if "score" in vars(c))  # Attack's own, at the least
    params = list(inspect.signature(vars(owner)["score"]).parameters.values())[1:2]
    annotation = str(params[0].annotation) if params else ""
    if params and (
        params[0].name == "signals" or ("SignalSet" in annotation and "Scoring" not in annotation)
    ):
        raise ConfigError(
            f"attack {name!r} ({cls.__qualname__}) overrides score(self, signals), the previous "
            "release's hook: rename that method to score_signals(self, signals) (score now "
            "receives ScoringInputs; see docs/extending.md)"
        )


# the base that declares ``score_with_requests`` abstractly (named, not imported: its module
# imports imprint.attacks.base, which imports this one)
_MODEL_CALL_BASE = ("imprint.attacks.model_calls", "ModelCallAttack")


def _owner(cls: type, attr: str) -> type:
    """The class of ``cls``'s method resolution order that defines ``attr``."""
    return next(c for c in cls.__mro__ if attr in vars(c))


def _is_model_call_base(cls: type) -> bool:
    return (cls.__module__, cls.__qualname__) == _MODEL_CALL_BASE


def _missing_hook(cls: type) -> str | None:
    """The scoring hook ``cls`` must define and does not, else None."""
    if _owner(cls, "score_tokens") is not Attack:
        return None  # scores (and tokens) through its own entry point
    score_owner = _owner(cls, "score")
    if score_owner is Attack:
        hook = "score_signals"
        return hook if _owner(cls, hook) is Attack else None
    if _is_model_call_base(score_owner):
        hook = "score_with_requests"
        return hook if _is_model_call_base(_owner(cls, hook)) else None
    return None  # overrides score itself


def _own_methods(cls: type) -> list[str]:
    """Names of the methods ``cls`` and its bases below the library's define."""
    names: list[str] = []
    for klass in cls.__mro__:
        if klass is Attack or _is_model_call_base(klass) or klass is object:
            continue
        names += [n for n, v in vars(klass).items() if callable(v) and not n.startswith("__")]
    return names


def _refuse_missing_score_hook(name: str, cls: type) -> None:
    """Refuse a class that overrides none of the scoring hooks (a typo such as
    ``score_signal``): the run would do the model work, then stop on a bare
    NotImplementedError."""
    hook = _missing_hook(cls)
    if hook is None:
        return
    own = _own_methods(cls)
    close = difflib.get_close_matches(hook, own, n=1, cutoff=0.6) or difflib.get_close_matches(
        hook, [n for n in own if n.startswith("score")], n=1, cutoff=0.0
    )
    hint = f"; it defines {close[0]}(): a typo?" if close else ""
    raise ConfigError(
        f"attack {name!r} ({cls.__qualname__}) defines no scoring hook: define {hook}(self, "
        f"{'signals' if hook == 'score_signals' else 'requests, texts, **kwargs'}) "
        f"(or override score(self, inputs)){hint}"
    )


def _refuse_bad_class_attributes(name: str, cls: type[Attack]) -> None:
    """``summary`` and ``paper`` are strings; ``deviations`` a tuple (or list) of strings, one
    sentence each (a bare string would be listed one character a line)."""
    value: Any
    for attr, value in (("summary", cls.summary), ("paper", cls.paper)):
        if not isinstance(value, str):
            raise ConfigError(
                f"attack {name!r} ({cls.__qualname__}): {attr} must be a string, got "
                f"{type(value).__name__} {value!r}"
            )
    deviations: Any = cls.deviations
    if isinstance(deviations, str):
        raise ConfigError(
            f"attack {name!r} ({cls.__qualname__}): deviations must be a tuple of sentences, got "
            f"the string {deviations!r}; write deviations = ({deviations!r},)"
        )
    if not isinstance(deviations, (tuple, list)) or not all(isinstance(d, str) for d in deviations):
        raise ConfigError(
            f"attack {name!r} ({cls.__qualname__}): deviations must be a tuple of strings (one "
            f"sentence each), got {deviations!r}"
        )


def _scan_package() -> None:
    """Import the modules of this package that the table does not name: an attack added as
    one new file registers itself there (the worked example in docs/extending.md)."""
    named = {ref.partition(":")[0] for ref in BUILTIN_ATTACKS.values()}
    for module in pkgutil.iter_modules([str(Path(__file__).parent)]):
        full = f"imprint.attacks.{module.name}"
        if full in named:
            continue
        try:
            importlib.import_module(full)
        except Exception as err:  # one bad file must not hide the other attacks
            warnings.warn(
                f"module {full} failed to import ({type(err).__name__}: {err}); the attacks it "
                "registers are left out: fix the file or remove it",
                PluginWarning,
                stacklevel=2,
            )


ATTACKS: Registry[type[Any]] = Registry(
    "attack", group=GROUP, check=_check_attack, sources=(_scan_package,)
)
for _name, _ref in BUILTIN_ATTACKS.items():
    ATTACKS.add(_name, _ref)


def register(name: str, *, force: bool = False) -> Callable[[C], C]:
    """Class decorator adding an attack under ``name``; duplicates raise unless ``force``."""

    def wrap(cls: C) -> C:
        ATTACKS.add(name, cls, force=force)
        return cls

    return wrap


def available_attacks() -> dict[str, type[Any]]:
    """Registered attacks by name, sorted (every one imported; a broken plugin is warned of
    and left out)."""
    return ATTACKS.load_all()


def get_attack_class(name: str) -> type[Any]:
    """The attack class registered as ``name``; unknown names raise with the closest matches."""
    return ATTACKS.get(name)


def attack_entries() -> list[Entry]:
    """Every attack's name and origin (built-in, plugin DIST, module M), broken ones included."""
    ATTACKS.load_all()
    return ATTACKS.entries()
