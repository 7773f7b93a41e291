"""Walks over decoded JSON values that never recurse: a value a client sent or an old database holds may nest
hundreds of levels deep, and a recursive walk of it dies with ``RecursionError`` (issue 44).

``MAX_DEPTH`` bounds what trialfleet accepts from outside (parameters of a customized trial, a metric); what
is already stored is read and written by :func:`finite_copy` whatever its depth.
"""

from __future__ import annotations

import math
from typing import Any

#: lists and objects nest at most this deep in a value trialfleet accepts (SQLite's JSON functions read it)
MAX_DEPTH = 32


def depth(value: object) -> int:
    """How deeply ``value`` nests lists and objects (0 for a number or a string)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list, tuple)):
            deepest = max(deepest, level)
            stack += [(child, level + 1) for child in _children(item)]
    return deepest


def non_finite(value: object) -> tuple[str, float] | None:
    """The key path (``x.0.lr``, empty for ``value`` itself) and the number of the first NaN or infinite number
    in ``value``; None when there is none. Standard JSON has no such numbers: SQLite's JSON functions refuse a
    document that holds one."""
    stack: list[tuple[object, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return path, item
        if isinstance(item, dict):
            stack += [(child, _join(path, key)) for key, child in reversed(list(item.items()))]
        elif isinstance(item, (list, tuple)):
            stack += [(child, _join(path, i)) for i, child in reversed(list(enumerate(item)))]
    return None


def finite_copy(value: Any) -> Any:
    """``value`` with every NaN or infinite number replaced by None (JSON's null), tuples as lists."""
    if not isinstance(value, (dict, list, tuple)):
        return _finite(value)
    root: dict[Any, Any] | list[Any] = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, dict[Any, Any] | list[Any]]] = [(value, root)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, child in items:
            if isinstance(child, (dict, list, tuple)):
                copied: dict[Any, Any] | list[Any] = {} if isinstance(child, dict) else []
                stack.append((child, copied))
                child = copied
            else:
                child = _finite(child)
            if isinstance(target, dict):
                target[key] = child
            else:
                target.append(child)
    return root


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _children(item: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> Any:
    return item.values() if isinstance(item, dict) else item


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)
