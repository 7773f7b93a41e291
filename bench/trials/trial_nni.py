"""Launch-overhead trial through NNI's API: ``import nni``, read the parameters, report x as the final result.

The same workload as NNI's baseline (``trial_nni.py`` of the NNI measurements): under trialfleet ``import nni``
resolves to trialfleet's shim, under NNI to the real package. It records its own timeline in
``$NNI_OUTPUT_DIR/bench_timing.json`` so the driver can split a trial's lifetime.
"""

import time

t_start = time.time()
import json  # noqa: E402
import os  # noqa: E402

import nni  # noqa: E402

t_imported = time.time()
params = nni.get_next_parameter() or {}
t_param = time.time()
x = params.get("x", 0.5)
nni.report_final_result(x)
t_reported = time.time()

out = os.environ.get("NNI_OUTPUT_DIR")
if out:
    with open(os.path.join(out, "bench_timing.json"), "w") as f:
        json.dump({"start": t_start, "imported": t_imported, "param": t_param, "reported": t_reported}, f)
