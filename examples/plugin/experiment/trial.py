"""A trial that reports where it ran: its CPU set (from the plugin) and a value of its parameters."""

import os

import nni

params = nni.get_next_parameter()
print("pinned to CPU set", os.environ.get("PINNED_CPU_SET"))
nni.report_final_result((params["x"] - 0.5) ** 2 + params["y"])
