"""NNI's shortcut mutables (``nni.choice`` ...), returning search-space entries.

``search_space = {"lr": nni.loguniform("lr", 1e-4, 1e-1)}`` gives the same dict as writing
``{"lr": {"_type": "loguniform", "_value": [1e-4, 1e-1]}}``. Bounds are checked as NNI checks them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["choice", "loguniform", "normal", "qloguniform", "qnormal", "quniform", "uniform"]


def choice(label: str, choices: list[Any]) -> dict[str, Any]:
    """One of ``choices`` (categorical)."""
    return _spec("choice", list(choices))


def uniform(label: str, low: float, high: float) -> dict[str, Any]:
    """A float drawn uniformly from ``[low, high]``."""
    _check_order(low, high)
    return _spec("uniform", [low, high])


def quniform(label: str, low: float, high: float, quantize: float) -> dict[str, Any]:
    """``clip(round(uniform(low, high) / quantize) * quantize, low, high)``."""
    _check_order(low, high)
    return _spec("quniform", [low, high, quantize])


def loguniform(label: str, low: float, high: float) -> dict[str, Any]:
    """``exp(uniform(log(low), log(high)))``; both bounds strictly positive."""
    _check_order(low, high)
    if low <= 0 or high <= 0:
        raise ValueError("low and high must be strictly greater than 0.")
    return _spec("loguniform", [low, high])


def qloguniform(label: str, low: float, high: float, quantize: float) -> dict[str, Any]:
    """:func:`loguniform` rounded to a multiple of ``quantize``."""
    return _spec("qloguniform", [low, high, quantize])


def normal(label: str, mu: float, sigma: float) -> dict[str, Any]:
    """A normal distribution with mean ``mu`` and standard deviation ``sigma``."""
    if sigma <= 0:
        raise ValueError("Standard deviation must be strictly greater than 0.")
    return _spec("normal", [mu, sigma])


def qnormal(label: str, mu: float, sigma: float, quantize: float) -> dict[str, Any]:
    """:func:`normal` rounded to a multiple of ``quantize``."""
    return _spec("qnormal", [mu, sigma, quantize])


def _check_order(low: float, high: float) -> None:
    if low >= high:
        raise ValueError("low must be strictly smaller than high.")


def _spec(kind: str, value: list[Any]) -> dict[str, Any]:
    return {"_type": kind, "_value": value}
