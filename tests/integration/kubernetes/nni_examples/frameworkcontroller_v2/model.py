"""A stand-in for the example's trial (NNI's needs TensorFlow or PyTorch and a data set): the same use of nni.

Every trial reports the same learning curve, so an assessor (Medianstop) lets each run to its end; the final
result depends on the parameters."""

import os

import nni

params = nni.get_next_parameter()
for epoch in range(3):
    nni.report_intermediate_result((epoch + 1) / 3)
nni.report_final_result(sum(float(value) for value in params.values()) % 1)
print("trial", nni.get_trial_id(), "replica", os.environ["NNI_SYS_DIR"], "params", params)
