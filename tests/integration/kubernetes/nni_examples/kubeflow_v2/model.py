"""A stand-in for the example's trial (NNI's needs TensorFlow or PyTorch and a data set): the same use of nni.

Every trial reports the same learning curve, so an assessor (Medianstop) lets each run to its end; the final
result depends on the parameters. Like the example's ``torch.distributed`` trial, whose process group waits for
``WORLD_SIZE`` members, every replica first waits until all of them have joined: here through files in the
trial's directory on the shared storage (``<trial>/replicas/<role>-<index>/`` for all but the master), as a
``FileStore`` rendezvous would."""

import os
import time
from pathlib import Path

import nni

here = Path(os.environ["NNI_SYS_DIR"])
world = int(os.environ.get("WORLD_SIZE", "1"))
if world > 1:
    joined = (here.parents[1] if here.parent.name == "replicas" else here) / "joined"
    joined.mkdir(exist_ok=True)
    (joined / os.environ["RANK"]).touch()
    deadline = time.monotonic() + 120
    while len(list(joined.iterdir())) < world:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {sorted(p.name for p in joined.iterdir())} of {world} replicas joined")
        time.sleep(0.1)

params = nni.get_next_parameter()
for epoch in range(3):
    nni.report_intermediate_result((epoch + 1) / 3)
nni.report_final_result(sum(float(value) for value in params.values()) % 1)
print("trial", nni.get_trial_id(), "replica", os.environ["NNI_SYS_DIR"], "params", params)
