"""``nni.dump`` / ``nni.load`` / ``nni.trace`` over plain JSON.

NNI's versions use json-tricks and cloudpickle to round-trip arbitrary objects; trials use them for
plain data (parameters, metrics, small state files), which JSON covers without a 2-second import.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, TypeVar

    T = TypeVar("T")


def dump(obj: Any, fp: Any = None, **json_kwargs: Any) -> str:
    """``obj`` as a JSON string; also written to ``fp`` (a text file object or a path) when given."""
    import json

    for nni_only in ("use_trace", "pickle_size_limit"):
        json_kwargs.pop(nni_only, None)
    text = json.dumps(obj, **json_kwargs)
    if fp is None:
        return text
    if hasattr(fp, "write"):
        fp.write(text)
    else:
        with open(fp, "w", encoding="utf-8") as file:
            file.write(text)
    return text


def load(string: str | None = None, *, fp: Any = None, **json_kwargs: Any) -> Any:
    """Parse JSON from ``string``, or from ``fp`` (a text file object or a path)."""
    import json

    json_kwargs.pop("ignore_comments", None)
    if string is not None:
        if hasattr(string, "read"):
            raise TypeError("load() got a file object as string; use nni.load(fp=file)")
        return json.loads(string, **json_kwargs)
    if fp is None:
        raise TypeError("load() needs a string or fp")
    if hasattr(fp, "read"):
        return json.load(fp, **json_kwargs)
    with open(fp, encoding="utf-8") as file:
        return json.load(file, **json_kwargs)


def trace(cls_or_func: T | None = None, *, kw_only: bool = True) -> Any:
    """NNI's tracing decorator, as the identity: ``@nni.trace`` and ``@nni.trace()`` both work."""
    if cls_or_func is None:
        return lambda target: target
    return cls_or_func
