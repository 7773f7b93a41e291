#!/bin/bash
# trialfleet: worker <worker> (reuse mode), of experiment golden.
# Submitted with sbatch by the trialfleet manager; the options are on its command line.
printf "%s\n" "$SLURM_JOB_ID" > '<tmp>/shared sp ace '"'"'q'"'"' "dq" $(touch pwned) `touch pwned` ;|&<> %j \n ünï ✓
new line/golden/workers/<worker>/slurm_job_id'
# --- setupScript ---
export FROM_SETUP='sp ace '"'"'q'"'"' "dq" $(touch pwned) `touch pwned` ;|&<> %j \n ünï ✓
new line'
echo 'setup: $(not run)'
# --- end of setupScript ---
export PATH='/opt/sp ace '"'"'q'"'"' "dq" $(touch pwned) `touch pwned` ;|&<> %j \n ünï ✓
new line/bin':"$PATH"
unset NNI_TRIAL_COMMAND_CHANNEL REUSE_MODE MULTI_PHASE SDK_PROCESS
# the nni shim only for a python3 that has no real nni installed
if [ "$(python3 -c 'import importlib.util, os
s = importlib.util.find_spec('"'"'nni'"'"')
o = s.origin if s is not None else None
print('"'"'yes'"'"' if o and not os.path.exists(os.path.join(os.path.dirname(o), '"'"'_trialfleet.py'"'"')) else '"'"'no'"'"')
' 2>/dev/null)" != yes ]; then
    export PYTHONPATH='<tmp>/shared sp ace '"'"'q'"'"' "dq" $(touch pwned) `touch pwned` ;|&<> %j \n ünï ✓
new line/golden/.trialfleet/<version>/nni-shim'"${PYTHONPATH:+:$PYTHONPATH}"
fi
exec python3 -I -S '<tmp>/shared sp ace '"'"'q'"'"' "dq" $(touch pwned) `touch pwned` ;|&<> %j \n ünï ✓
new line/golden/.trialfleet/<version>/keeper/worker.py' '<tmp>/shared sp ace '"'"'q'"'"' "dq" $(touch pwned) `touch pwned` ;|&<> %j \n ünï ✓
new line/golden/workers/<worker>' '<tmp>/shared sp ace '"'"'q'"'"' "dq" $(touch pwned) `touch pwned` ;|&<> %j \n ünï ✓
new line/golden/trials' 90
