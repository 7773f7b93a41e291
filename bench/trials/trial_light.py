"""NNI's light trial: the NNI 3.0 v3 HTTP trial channel spoken with the standard library (no ``import nni``).

NNI's counterpart of a trial on trialfleet's plain SDK: it isolates NNI's scheduling cost from the
seconds that ``import nni`` takes. Same wire exchange as ``nni.get_next_parameter()`` +
``nni.report_final_result(x)`` (workload definition from the NNI baseline measurements).
"""

import time

t_start = time.time()
import json  # noqa: E402
import os  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402

url = os.environ["NNI_TRIAL_COMMAND_CHANNEL"]


def put(obj: dict) -> None:
    body = json.dumps(obj).encode()
    request = urllib.request.Request(
        url, data=body, method="PUT", headers={"Content-Type": "application/json"}
    )
    urllib.request.urlopen(request).read()


def receive() -> dict:
    while True:
        try:
            with urllib.request.urlopen(url) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code != 408:  # 408: the long poll timed out, ask again
                raise


put({"type": "request_parameter"})
param = json.loads(receive()["parameter"])
t_param = time.time()
x = param["parameters"]["x"]
metric = {
    "parameter_id": param.get("parameter_id"),
    "trial_job_id": os.environ.get("NNI_TRIAL_JOB_ID"),
    "type": "FINAL",
    "sequence": 0,
    "value": json.dumps(x),
}
put({"type": "metric", "metric": json.dumps(metric)})
t_reported = time.time()

out = os.environ.get("NNI_OUTPUT_DIR")
if out:
    with open(os.path.join(out, "bench_timing.json"), "w") as f:
        json.dump({"start": t_start, "imported": t_start, "param": t_param, "reported": t_reported}, f)
