"""What the Node.js rest server does to values, done the same way here.

The real server parses job protocols with js-yaml 3 (``yaml.safeLoad``) and answers with ``JSON.stringify``. Both
differ from Python's defaults in ways a client can see: js-yaml knows only ``true``/``false`` as booleans (PyYAML
also takes ``yes``/``on``), reads ``1e3`` as a number, and rejects duplicate keys; JavaScript prints ``1.0`` as
``1`` and ``1e-7`` as ``1e-7``; ``JSON.stringify`` drops keys whose value is ``undefined``.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

import yaml


class _Undefined:
    """JavaScript's ``undefined``: a key holding it is left out of JSON, as ``JSON.stringify`` does."""

    def __repr__(self) -> str:
        return "undefined"


UNDEFINED: Any = _Undefined()

# js-yaml 3's DEFAULT_SAFE_SCHEMA, in its resolution order (null, bool, int, float, timestamp, merge)
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(
    r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$"
)
_FLOAT = re.compile(
    r"^(?:[-+]?(?:0|[1-9][0-9_]*)(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?"
    r"|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*"
    r"|[-+]?\.(?:inf|Inf|INF)"
    r"|\.(?:nan|NaN|NAN))$"
)
_TIMESTAMP = yaml.resolver.Resolver.yaml_implicit_resolvers["2"][-1][1]
_MERGE = re.compile(r"^(?:<<)$")


class JsYamlLoader(yaml.SafeLoader):
    """PyYAML's safe loader resolving plain scalars the way js-yaml 3's ``safeLoad`` does."""

    yaml_implicit_resolvers: dict[str | None, list[tuple[str, re.Pattern[str]]]] = {}

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, list | dict):
                key = json.dumps(key, default=str)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, "duplicated mapping key", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _add(tag: str, pattern: re.Pattern[str], first: Iterable[str | None]) -> None:
    for char in first:
        JsYamlLoader.yaml_implicit_resolvers.setdefault(char, []).append((tag, pattern))


_add("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""])
_add("tag:yaml.org,2002:bool", _BOOL, list("tTfF"))
_add("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_add("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
_add("tag:yaml.org,2002:timestamp", _TIMESTAMP, list("0123456789"))
_add("tag:yaml.org,2002:merge", _MERGE, ["<"])


def load_yaml(text: str) -> Any:
    """``yaml.safeLoad(text)`` of js-yaml 3: an empty document is ``undefined``."""
    value = yaml.load(text, Loader=JsYamlLoader)
    if value is None and not text.strip():
        return UNDEFINED
    return value


def number(value: float) -> str:
    """``String(x)`` for a JavaScript number (ECMA-262 Number::toString)."""
    if isinstance(value, bool):
        raise TypeError("a boolean is not a number")
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "0"
    _, digits_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple))
    k = len(digits)
    n = k + int(exponent)  # value = 0.digits * 10**n
    text = _place_point(digits, k, n)
    return ("-" if value < 0 else "") + text


def _place_point(digits: str, k: int, n: int) -> str:
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * (-n) + digits
    mantissa = digits[0] + ("." + digits[1:] if k > 1 else "")
    return f"{mantissa}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"


def string(value: Any) -> str:
    """``String(value)`` the way JavaScript concatenation renders it."""
    if value is None:
        return "null"
    if value is UNDEFINED:
        return "undefined"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return number(value)
    if isinstance(value, list):
        return ",".join("" if item is None or item is UNDEFINED else string(item) for item in value)
    if isinstance(value, dict):
        return "[object Object]"
    if isinstance(value, dt.datetime | dt.date):
        return _iso(value)
    return str(value)


def _iso(value: dt.date) -> str:
    if not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day, tzinfo=dt.timezone.utc)
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    value = value.astimezone(dt.timezone.utc)
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def dumps(value: Any) -> str:
    """``JSON.stringify(value)`` (express's ``res.json`` with no indentation)."""
    if value is None or value is UNDEFINED:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return number(value) if math.isfinite(value) else "null"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dt.datetime | dt.date):
        return json.dumps(_iso(value))
    if isinstance(value, dict):
        items = (
            f"{json.dumps(str(k), ensure_ascii=False)}:{dumps(v)}"
            for k, v in value.items()
            if v is not UNDEFINED
        )
        return "{" + ",".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(dumps(item) for item in value) + "]"
    raise TypeError(f"cannot serialize {type(value).__name__}")


_JS_NUMBER = re.compile(r"[+-]?(?:Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)")


def to_number(text: str) -> float:
    """``Number(text)`` for a string: blank is 0, anything unparsable NaN."""
    text = text.strip()
    if not text:
        return 0
    for prefix, base in (("0x", 16), ("0b", 2), ("0o", 8)):
        if text[:2].lower() == prefix:
            try:
                return int(text[2:], base)
            except ValueError:
                return math.nan
    if not _JS_NUMBER.fullmatch(text):
        return math.nan
    value = float(text)
    return int(value) if value.is_integer() else value


def parse_int(text: str | None) -> float | int:
    """``parseInt(text)``: leading digits after optional whitespace and sign, else NaN."""
    match = re.match(r"\s*([-+]?\d+)", text or "")
    return int(match.group(1)) if match else math.nan


__all__ = ["UNDEFINED", "JsYamlLoader", "dumps", "load_yaml", "number", "parse_int", "string", "to_number"]
