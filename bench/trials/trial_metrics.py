"""Metric-ingestion trial: ``BENCH_N`` (default 10000) intermediate results as fast as possible, then a final.

Intermediate result i is the integer i, so the driver can count lost, duplicated and reordered ones.
"""

import time

t_start = time.time()
import json  # noqa: E402
import os  # noqa: E402

import nni  # noqa: E402

n = int(os.environ.get("BENCH_N", "10000"))
t_imported = time.time()
time.sleep(float(os.environ.get("BENCH_DELAY", "0")))
nni.get_next_parameter()
t_param = time.time()
for i in range(n):
    nni.report_intermediate_result(i)
t_intermediate = time.time()
nni.report_final_result(n)
t_reported = time.time()

out = os.environ.get("NNI_OUTPUT_DIR")
if out:
    with open(os.path.join(out, "bench_timing.json"), "w") as f:
        timing = {"start": t_start, "imported": t_imported, "param": t_param}
        json.dump({**timing, "intermediate_done": t_intermediate, "reported": t_reported, "n": n}, f)
