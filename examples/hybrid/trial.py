"""Example trial for a hybrid experiment: plain NNI trial code; it runs unchanged on each of the platforms."""

import math
import os
import time

import nni


def main() -> None:
    params = nni.get_next_parameter() or {"x": 0.5, "y": 0.5}
    x, y = float(params["x"]), float(params["y"])
    print(f"on {os.environ.get('NNI_PLATFORM')} ({os.uname().nodename}): x={x:.3f} y={y:.3f}", flush=True)
    loss = math.inf
    for step in range(5):
        loss = (x - 0.3) ** 2 + (y + 0.2) ** 2 + 0.1 * math.exp(-step)
        nni.report_intermediate_result(loss)
        time.sleep(0.2)
    nni.report_final_result(loss)


if __name__ == "__main__":
    main()
