"""The learning-curve families of NNI's Curvefitting assessor (``curvefunctions.py``) with NNI's starting values.

``x`` is the step (1, 2, ...), a numpy array; every family returns the predicted metric at those steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def vap(x: Any, a: float, b: float, c: float) -> Any:
    return np.exp(a + b / x + c * np.log(x))


def pow3(x: Any, c: float, a: float, alpha: float) -> Any:
    return c - a * x ** (-alpha)


def linear(x: Any, a: float, b: float) -> Any:
    return a * x + b


def logx_linear(x: Any, a: float, b: float) -> Any:
    return a * np.log(x) + b


def dr_hill_zero_background(x: Any, theta: float, eta: float, kappa: float) -> Any:
    return (theta * x**eta) / (kappa**eta + x**eta)


def log_power(x: Any, a: float, b: float, c: float) -> Any:
    return a / (1.0 + (x / np.exp(b)) ** c)


def pow4(x: Any, alpha: float, a: float, b: float, c: float) -> Any:
    return c - (a * x + b) ** -alpha


def mmf(x: Any, alpha: float, beta: float, kappa: float, delta: float) -> Any:
    return alpha - (alpha - beta) / (1.0 + (kappa * x) ** delta)


def exp4(x: Any, c: float, a: float, b: float, alpha: float) -> Any:
    return c - np.exp(-a * (x**alpha) + b)


def ilog2(x: Any, c: float, a: float) -> Any:
    return c - a / np.log(x)


def weibull(x: Any, alpha: float, beta: float, kappa: float, delta: float) -> Any:
    return alpha - (alpha - beta) * np.exp(-((kappa * x) ** delta))


def janoschek(x: Any, a: float, beta: float, k: float, delta: float) -> Any:
    return a - (a - beta) * np.exp(-k * x**delta)


CURVES: tuple[tuple[Callable[..., Any], tuple[float, ...]], ...] = (
    (vap, (-0.622028, -0.470050, 0.042322)),
    (pow3, (0.84, 0.52, 0.01)),
    (linear, (1.0, 0.0)),
    (logx_linear, (0.378106, 0.046506)),
    (dr_hill_zero_background, (0.772320, 0.586449, 2.460843)),
    (log_power, (0.77, 2.98, -0.51)),
    (pow4, (0.1, 200, 0.0, 0.8)),
    (mmf, (0.7, 0.1, 0.01, 5)),
    (exp4, (0.7, 0.8, -0.8, 0.3)),
    (ilog2, (0.78, 0.43)),
    (weibull, (0.7, 0.1, 0.01, 1)),
    (janoschek, (0.73, 0.07, 0.355, 0.46)),
)
