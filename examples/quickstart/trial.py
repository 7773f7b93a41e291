"""Quickstart trial: tune a small pure-Python model (no dependencies).

It fits a polynomial regressor with gradient descent on a synthetic data set, reporting the validation
error after every epoch and the final validation error at the end. The tuner minimises it.
"""

import math
import random

from trialfleet import trial


def make_data(n: int, seed: int) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    xs = [rng.uniform(-1, 1) for _ in range(n)]
    return [(x, math.sin(3 * x) + 0.1 * rng.gauss(0, 1)) for x in xs]


def features(x: float, degree: int) -> list[float]:
    return [x**k for k in range(degree + 1)]


def mse(weights: list[float], data: list[tuple[float, float]], degree: int) -> float:
    return sum(
        (sum(w * f for w, f in zip(weights, features(x, degree), strict=True)) - y) ** 2 for x, y in data
    ) / len(data)


def main() -> None:
    params = trial.get_next_parameter() or {"lr": 0.1, "degree": 3, "epochs": 20, "l2": 1e-4}
    degree, lr, l2 = int(params["degree"]), float(params["lr"]), float(params["l2"])
    train, valid = make_data(1000, seed=1), make_data(300, seed=2)
    weights = [0.0] * (degree + 1)
    for _epoch in range(int(params["epochs"])):
        for x, y in train:
            feats = features(x, degree)
            err = sum(w * f for w, f in zip(weights, feats, strict=True)) - y
            weights = [w - lr * (err * f + l2 * w) for w, f in zip(weights, feats, strict=True)]
        trial.report_intermediate_result(min(mse(weights, valid, degree), 1e6))
    trial.report_final_result(min(mse(weights, valid, degree), 1e6))


if __name__ == "__main__":
    main()
