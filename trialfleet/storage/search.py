"""The trials search of the web UI's table: its words as SQL over the trials table, and hints for words that
match nothing the way they were probably meant (``lr:abc`` where ``lr`` takes numbers).

See docs/webui.md, "Searching trials", for the words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trialfleet.storage.sql import PARAMETERS_SQL

#: the search space types whose values are numbers
_NUMERIC_TYPES = frozenset(
    {"uniform", "quniform", "loguniform", "qloguniform", "normal", "qnormal", "lognormal", "qlognormal", "randint"}
)


def search_hints(search: str, space: dict[str, Any] | None) -> list[str]:
    """What the page says under the search box about words that cannot match as written: a ``name:value`` word
    whose name is no parameter of the search space, or whose values are not numbers where the parameter's are."""
    hints = []
    space = space or {}
    for token in search.split():
        name, sep, value = token.partition(":")
        if not sep or not value or name == "status" or not name.replace("_", "").replace("-", "").isalnum():
            continue
        if space and name not in space:
            hints.append(f"{token}: the search space has no parameter {name!r} ({', '.join(sorted(space))})")
        elif name in space and _numeric(space[name]) and not _numbers(value):
            hints.append(
                f"{token}: {name} takes numbers: {name}:0.001..0.01 (a range, either end may be left out) "
                f"or {name}:0.001,0.01 (any of these values)"
            )
    return hints


def _numeric(spec: Any) -> bool:
    if not isinstance(spec, dict):
        return False
    if spec.get("_type") == "choice":
        options = spec.get("_value") or []
        return bool(options) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in options)
    return spec.get("_type") in _NUMERIC_TYPES


def _numbers(value: str) -> bool:
    low, dots, high = value.partition("..")
    words = [low, high] if dots else value.split(",")
    try:
        [float(w) for w in words if w]
    except ValueError:
        return False
    return any(words)


def filters(statuses: Sequence[str], search: str) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    args: list[Any] = []
    if statuses:
        clauses.append(f"status IN ({', '.join('?' for _ in statuses)})")
        args += list(statuses)
    for token in search.split():
        clause, values = _search_clause(token)
        clauses.append(clause)
        args += values
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


def _search_clause(token: str) -> tuple[str, list[Any]]:
    """One word of the trials search (words are ANDed):

    * ``#12`` — Trial No. 12; ``12`` — Trial No. 12, or 12 anywhere in the id, status or parameters
    * ``lr:0.001..0.01`` — a parameter within a range (either end may be left out: ``lr:..0.01``)
    * ``optimizer:adam,sgd`` — a parameter equal to one of the values; ``status:RUNNING,WAITING`` likewise
    * anything else — a substring of the id, the status or the parameters
    """
    if token.startswith("#") and token[1:].isdigit():
        return "sequence_id = ?", [int(token[1:])]
    name, sep, value = token.partition(":")
    if sep and value and name.replace("_", "").replace("-", "").isalnum():
        if name == "status":
            values = [v.upper() for v in value.split(",") if v]
            return f"status IN ({', '.join('?' for _ in values)})", values
        column = f"json_extract({PARAMETERS_SQL}, '$.parameters.\"{name}\"')"
        low, dots, high = value.partition("..")
        if dots:
            bounds = _range(low, high)
            if bounds is not None:
                sql = " AND ".join(f"{column} {op} ?" for op, _ in bounds)
                return f"({sql})", [b for _, b in bounds]
        choices = value.split(",")
        return f"CAST({column} AS TEXT) IN ({', '.join('?' for _ in choices)})", [_choice(c) for c in choices]
    escaped = token.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    like = f"%{escaped}%"
    return (
        "(id LIKE ? ESCAPE '\\' OR status LIKE ? ESCAPE '\\' OR CAST(sequence_id AS TEXT) = ? "
        f"OR json_extract({PARAMETERS_SQL}, '$.parameters') LIKE ? ESCAPE '\\')",
        [like, like, token, like],
    )


def _range(low: str, high: str) -> list[tuple[str, float]] | None:
    try:
        bounds = [(">=", float(low))] if low else []
        bounds += [("<=", float(high))] if high else []
    except ValueError:
        return None
    return bounds or None


def _choice(text: str) -> str:
    """A choice as SQLite renders the stored JSON value as text (``0.001``, ``32``, ``adam``)."""
    try:
        number = float(text)
    except ValueError:
        return text
    return (
        str(int(number))
        if number.is_integer() and "." not in text and "e" not in text.lower()
        else repr(number)
    )
