"""A stand-in for NNI's mnist-tfv1 example (which needs TensorFlow): an unchanged NNI trial, `import nni` only.

Mimics the structure of NNI's mnist examples (argparse defaults merged with tuned parameters, one
intermediate result per epoch, a final result) with a synthetic objective instead of a data set.
"""

import argparse
import math
import time

import nni
from nni.utils import merge_parameter


def get_params() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.01)
    parser.add_argument("--momentum", type=float, default=0.5)
    parser.add_argument("--hidden_size", type=int, default=128)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--sleep", type=float, default=0.05)
    args, _ = parser.parse_known_args()
    return args


def main(args: argparse.Namespace) -> None:
    accuracy = 0.0
    for epoch in range(args.epochs):
        time.sleep(args.sleep)
        gain = (1 - abs(math.log10(args.lr) + 2) / 3) * (0.5 + args.momentum / 2)
        accuracy = min(0.99, 0.5 + gain * 0.45 * (1 - math.exp(-(epoch + 1) * args.hidden_size / 256)))
        nni.report_intermediate_result(accuracy)
    nni.report_final_result({"default": accuracy, "hidden": args.hidden_size})


if __name__ == "__main__":
    tuned = nni.get_next_parameter()
    main(merge_parameter(get_params(), tuned))
