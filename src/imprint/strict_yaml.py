"""The one YAML reader of imprint: ``yaml.safe_load`` that refuses a key given twice.

PyYAML keeps the last of two equal keys in a mapping without a word, so ``attacks: [loss]``
followed later by ``attacks: [min_k]`` would silently run min_k only. Every YAML file the tool
reads (experiment grids, training manifests) goes through :func:`safe_load`, which raises a
:class:`DuplicateKeyError` naming both lines. Keys merged in with ``<<: *anchor`` may still be
overridden, as YAML's merge key intends.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.constructor import ConstructorError

__all__ = ["DuplicateKeyError", "safe_load"]

_MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(ConstructorError):
    """A mapping repeats a key; ``problem_mark`` is the second place, ``context_mark`` the first."""

    def __str__(self) -> str:  # one line: both places are named in the problem itself
        return str(self.problem)


class _StrictLoader(yaml.SafeLoader):
    """``SafeLoader`` whose mappings refuse a repeated key (checked before merges are spliced in,
    so only keys written in the mapping itself count)."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, yaml.Mark] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.get(key)
                except TypeError:  # an unhashable key: the base class raises its own error
                    continue
                if first is not None:
                    raise DuplicateKeyError(
                        "while reading a mapping",
                        first,
                        f"key {key!r} is given twice (first at line {first.line + 1}, again at "
                        f"line {key_node.start_mark.line + 1}); keep one of them",
                        key_node.start_mark,
                    )
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)  # type: ignore[arg-type]


def safe_load(text: str) -> Any:
    """Parse ``text`` as ``yaml.safe_load`` does, refusing a key repeated within one mapping
    (:class:`DuplicateKeyError`, a ``yaml.YAMLError``)."""
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
