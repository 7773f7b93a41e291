"""Example trial for the Kubernetes platforms: plain NNI trial code, run in every pod of the trial's job."""

import os
import time

import nni


def main() -> None:
    params = nni.get_next_parameter() or {"lr": 0.01, "momentum": 0.5}
    lr, momentum = float(params["lr"]), float(params["momentum"])
    print(f"pod {os.environ.get('HOSTNAME')}: lr={lr:.4f} momentum={momentum:.2f}", flush=True)
    accuracy = 0.0
    for epoch in range(1, 4):
        accuracy = 1 - 0.5 / (epoch * (1 + 10 * lr) * (1 + momentum))
        nni.report_intermediate_result(accuracy)
        time.sleep(0.2)
    nni.report_final_result(accuracy)


if __name__ == "__main__":
    main()
