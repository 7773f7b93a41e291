"""How the server's bodies are encoded: JSON as NNI's routes send it, JSON a browser parses, and lists encoded
chunk by chunk. A leaf of ``server/``: the response cache, the whole lists and the routes import it, it imports
none of them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from trialfleet.json_values import finite_copy


def encode_json(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def encode_strict_json(payload: Any) -> str:
    """JSON that a browser's ``JSON.parse`` reads: a NaN or infinite number (a trial may report one) is null.
    NNI's routes keep Python's ``NaN`` (:func:`encode_json`), which NNI's own clients expect."""
    try:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        return json.dumps(finite_copy(payload), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


@dataclass(frozen=True)
class EncodedJson:
    """A payload ``build`` has encoded itself (from kept pieces)."""

    data: bytes


def encoded_list(chunks: Iterable[list[Any]], encode: Callable[[Any], str] = encode_json) -> EncodedJson:
    """A JSON list encoded chunk by chunk: the records of a whole list are never all alive at once. Encoding
    10,000 trials' ``/metric-data`` (40,000 records, a 6.8 MB body) in one piece held 38 MB of rows and dicts at
    its peak, which the process kept as RSS after."""
    parts = [encode(chunk)[1:-1].encode() for chunk in chunks if chunk]
    return EncodedJson(b"[" + b",".join(parts) + b"]")
