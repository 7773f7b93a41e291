#!/bin/bash
# trialfleet: trial Tr1al, attempt 0, of experiment golden.
# Submitted with sbatch by the trialfleet manager; the options are on its command line.
printf "%s\n" "$SLURM_JOB_ID" > <tmp>/shared/golden/trials/Tr1al/slurm_job_id
unset NNI_TRIAL_COMMAND_CHANNEL REUSE_MODE MULTI_PHASE SDK_PROCESS
# the nni shim only for a python3 that has no real nni installed
if [ "$(python3 -c 'import importlib.util, os
s = importlib.util.find_spec('"'"'nni'"'"')
o = s.origin if s is not None else None
print('"'"'yes'"'"' if o and not os.path.exists(os.path.join(os.path.dirname(o), '"'"'_trialfleet.py'"'"')) else '"'"'no'"'"')
' 2>/dev/null)" != yes ]; then
    export PYTHONPATH=<tmp>/shared/golden/.trialfleet/<version>/nni-shim"${PYTHONPATH:+:$PYTHONPATH}"
fi
exec env -- NNI_PLATFORM=slurm NNI_EXP_ID=golden NNI_TRIAL_JOB_ID=Tr1al NNI_SYS_DIR=<tmp>/shared/golden/trials/Tr1al NNI_OUTPUT_DIR=<tmp>/shared/golden/trials/Tr1al NNI_TRIAL_SEQ_ID=5 NNI_CODE_DIR=<tmp>/shared/code python3 -I -S <tmp>/shared/golden/.trialfleet/<version>/keeper/keeper.py <tmp>/shared/golden/trials/Tr1al
