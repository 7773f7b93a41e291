#!/bin/bash
# trialfleet: trial Tr1al, attempt 0, of experiment golden (OpenPAI job nni_exp_golden_trial_Tr1al).
# Each task of the job runs it from the storage: /bin/bash <trial dir>/openpai-task.sh <task role>
trial_dir=/mnt/confignfs/golden/trials/Tr1al
task_dir="$trial_dir"
if [ "${1:-}" != worker ] || [ "${PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX:-0}" != 0 ]; then
    task_dir="$trial_dir/tasks/$1.${PAI_CURRENT_TASK_ROLE_CURRENT_TASK_INDEX:-0}"
    mkdir -p "$task_dir/.nni"
    cp "$trial_dir/parameter.cfg" "$task_dir/parameter.cfg"
    cp "$trial_dir/command-$1.json" "$task_dir/command.json"
fi
unset NNI_TRIAL_COMMAND_CHANNEL REUSE_MODE MULTI_PHASE SDK_PROCESS
# the nni shim only for a python3 that has no real nni installed
if [ "$(python3 -c 'import importlib.util, os
s = importlib.util.find_spec('"'"'nni'"'"')
o = s.origin if s is not None else None
print('"'"'yes'"'"' if o and not os.path.exists(os.path.join(os.path.dirname(o), '"'"'_trialfleet.py'"'"')) else '"'"'no'"'"')
' 2>/dev/null)" != yes ]; then
    export PYTHONPATH=/mnt/confignfs/golden/.trialfleet/<version>/nni-shim"${PYTHONPATH:+:$PYTHONPATH}"
fi
env -- "NNI_SYS_DIR=$task_dir" "NNI_OUTPUT_DIR=$task_dir" NNI_PLATFORM=openpai NNI_EXP_ID=golden NNI_TRIAL_JOB_ID=Tr1al NNI_TRIAL_SEQ_ID=0 NNI_CODE_DIR=/mnt/confignfs/golden/code/<code copy> CUDA_VISIBLE_DEVICES= python3 -I -S /mnt/confignfs/golden/.trialfleet/<version>/keeper/keeper.py "$task_dir"
keeper=$?
if [ "$keeper" != 0 ]; then exit "$keeper"; fi
exec python3 -I -S -c 'import json, os, sys
task_dir = sys.argv[1]
try:
    with open(os.path.join(task_dir, "result.json")) as f:
        result = json.load(f)
except (OSError, ValueError) as exc:
    sys.stderr.write("trialfleet: the trial keeper left no result.json: %s\n" % exc)
    sys.exit(1)
code, signo = result.get("exit_code"), result.get("signal")
status = code if isinstance(code, int) else 128 + signo if isinstance(signo, int) else 1
if status:
    sys.stderr.write("trialfleet: the trial ended: %s\n" % result.get("reason"))
    try:
        with open(os.path.join(task_dir, "trial.stderr"), "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4096))
            sys.stderr.write(f.read().decode("utf-8", "replace"))
    except OSError:
        pass
sys.exit(status)
' "$task_dir"
