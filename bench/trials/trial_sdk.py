"""Launch-overhead trial through trialfleet's own SDK (``from trialfleet import trial``).

Reports ``BENCH_INTERMEDIATE`` (default 0) intermediate results before the final one, so the scale
workload can give the metric routes something to serve.
"""

import time

t_start = time.time()
import json  # noqa: E402
import os  # noqa: E402

from trialfleet import trial  # noqa: E402

t_imported = time.time()
params = trial.get_next_parameter() or {}
t_param = time.time()
x = params.get("x", 0.5)
for step in range(int(os.environ.get("BENCH_INTERMEDIATE", "0"))):
    trial.report_intermediate_result(x * step)
trial.report_final_result(x)
t_reported = time.time()

out = os.environ.get("NNI_OUTPUT_DIR")
if out:
    with open(os.path.join(out, "bench_timing.json"), "w") as f:
        json.dump({"start": t_start, "imported": t_imported, "param": t_param, "reported": t_reported}, f)
