"""Remote example trial: an NNI trial (``import nni``), run on the SSH hosts with only Python 3.8+ there.

trialfleet uploads its ``nni`` shim next to the trial keeper, so nothing has to be installed on the hosts
(a host with the real ``nni`` installed uses that instead). It fits a polynomial with gradient descent on
synthetic data, reports the validation error after every epoch and the final one at the end.
"""

import math
import random

import nni


def make_data(n, seed):
    rng = random.Random(seed)
    xs = [rng.uniform(-1, 1) for _ in range(n)]
    return [(x, math.sin(3 * x) + 0.1 * rng.gauss(0, 1)) for x in xs]


def mse(weights, data):
    return sum((sum(w * x**k for k, w in enumerate(weights)) - y) ** 2 for x, y in data) / len(data)


def main():
    params = nni.get_next_parameter() or {"lr": 0.1, "degree": 3, "epochs": 20, "l2": 1e-4}
    degree, lr, l2 = int(params["degree"]), float(params["lr"]), float(params["l2"])
    train, valid = make_data(200, seed=1), make_data(100, seed=2)
    weights = [0.0] * (degree + 1)
    for _ in range(int(params["epochs"])):
        for x, y in train:
            error = sum(w * x**k for k, w in enumerate(weights)) - y
            weights = [w - lr * (2 * error * x**k + l2 * w) for k, w in enumerate(weights)]
        loss = mse(weights, valid)
        nni.report_intermediate_result(loss if math.isfinite(loss) else 1e9)
    loss = mse(weights, valid)
    nni.report_final_result(loss if math.isfinite(loss) else 1e9)


if __name__ == "__main__":
    main()
