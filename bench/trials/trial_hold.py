"""Stop workload trial: starts a child process (the trial's process tree is two deep), then sleeps
``BENCH_SECONDS`` (default 600). No SDK: the same file runs on trialfleet and on NNI."""

import os
import subprocess
import time

child = subprocess.Popen(["sleep", os.environ.get("BENCH_SECONDS", "600")])
time.sleep(float(os.environ.get("BENCH_SECONDS", "600")))
child.wait()
