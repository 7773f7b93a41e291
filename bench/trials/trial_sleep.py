"""Resume trial: reports one intermediate result, then sleeps ``BENCH_SECONDS`` (default 300) and reports final.

Each start appends the process id to ``$NNI_OUTPUT_DIR/bench_starts.log``: a trial re-run after a resume
shows two lines there, a re-adopted one keeps its single line.
"""

import os
import time

from trialfleet import trial

out = os.environ.get("NNI_OUTPUT_DIR", ".")
with open(os.path.join(out, "bench_starts.log"), "a") as f:
    f.write(f"{os.getpid()}\n")
params = trial.get_next_parameter() or {}
trial.report_intermediate_result(0)
time.sleep(float(os.environ.get("BENCH_SECONDS", "300")))
trial.report_final_result(params.get("x", 0.5))
