#!/bin/bash
# trialfleet: trial Tr1al, attempt 0, of experiment golden.
# Run by DLTS job e220f309-15da-5dc2-89b7-b6a1c7539501 (nni_exp_golden_trial_Tr1al), submitted by the trialfleet manager.
unset NNI_TRIAL_COMMAND_CHANNEL REUSE_MODE MULTI_PHASE SDK_PROCESS
# the nni shim only for a python3 that has no real nni installed
if [ "$(python3 -c 'import importlib.util, os
s = importlib.util.find_spec('"'"'nni'"'"')
o = s.origin if s is not None else None
print('"'"'yes'"'"' if o and not os.path.exists(os.path.join(os.path.dirname(o), '"'"'_trialfleet.py'"'"')) else '"'"'no'"'"')
' 2>/dev/null)" != yes ]; then
    export PYTHONPATH=/work/golden/.trialfleet/<version>/nni-shim"${PYTHONPATH:+:$PYTHONPATH}"
fi
exec env -- NNI_PLATFORM=dlts NNI_EXP_ID=golden NNI_TRIAL_JOB_ID=Tr1al NNI_SYS_DIR=/work/golden/trials/Tr1al NNI_OUTPUT_DIR=/work/golden/trials/Tr1al NNI_TRIAL_SEQ_ID=5 NNI_CODE_DIR=/work/golden/code/<code> python3 -I -S /work/golden/.trialfleet/<version>/keeper/keeper.py /work/golden/trials/Tr1al
