"""The environment a trial runs with, on every platform: NNI's variables, the spec's own, its GPUs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from trialfleet.training_services.spec import TrialSpec

#: inherited variables that would switch a real ``nni`` in the trial to another channel or mode
CHANNEL_VARIABLES = ("NNI_TRIAL_COMMAND_CHANNEL", "REUSE_MODE", "MULTI_PHASE", "SDK_PROCESS")


def nni_variables(
    platform: str, experiment_id: str, spec: TrialSpec, *, trial_dir: str, code_dir: str
) -> dict[str, str]:
    """The variables NNI gives a trial (``nni.get_experiment_id()``, ``NNI_OUTPUT_DIR`` … read them)."""
    return {
        "NNI_PLATFORM": platform,
        "NNI_EXP_ID": experiment_id,
        "NNI_TRIAL_JOB_ID": spec.trial_id,
        "NNI_SYS_DIR": trial_dir,
        "NNI_OUTPUT_DIR": trial_dir,
        "NNI_TRIAL_SEQ_ID": str(spec.sequence_id),
        "NNI_CODE_DIR": code_dir,
    }


def gpu_variables(gpu_number: int | None, gpus: Sequence[int] | None) -> dict[str, str]:
    """``CUDA_VISIBLE_DEVICES`` for the GPUs a trial was given.

    ``gpu_number`` None: no GPU scheduling, nothing set. ``gpus`` None with a positive count: the cluster's
    scheduler sets the variable itself (Slurm's GRES). Zero GPUs means none visible, on every platform.
    """
    if gpu_number is None or (gpus is None and gpu_number > 0):
        return {}
    variables = {"CUDA_VISIBLE_DEVICES": ",".join(str(index) for index in gpus or ())}
    if gpus:
        # NVML numbers GPUs by PCI bus; CUDA's default order may differ on mixed machines
        variables["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    return variables


def job_variables(
    platform: str, experiment_id: str, spec: TrialSpec, *, trial_dir: str, code_dir: str
) -> dict[str, str]:
    """What a cluster job's launch script sets for its trial: NNI's variables, the spec's own, and none of the
    GPUs for a trial given none (otherwise the cluster's scheduler sets ``CUDA_VISIBLE_DEVICES`` itself)."""
    env = nni_variables(platform, experiment_id, spec, trial_dir=trial_dir, code_dir=code_dir)
    env.update(spec.env)
    env.update(gpu_variables(spec.gpu_number, None))
    return env


def trial_environment(
    platform: str,
    experiment_id: str,
    spec: TrialSpec,
    *,
    trial_dir: str,
    code_dir: str,
    inherited: Mapping[str, str] | None = None,
    gpus: Sequence[int] | None = None,
) -> dict[str, str]:
    """What the worker gives a process (less the channel variables), then NNI's, the spec's and the GPUs'."""
    env = {key: value for key, value in (inherited or {}).items() if key not in CHANNEL_VARIABLES}
    env.update(nni_variables(platform, experiment_id, spec, trial_dir=trial_dir, code_dir=code_dir))
    env.update(spec.env)
    for key, value in gpu_variables(spec.gpu_number, gpus).items():
        if key == "CUDA_DEVICE_ORDER":
            env.setdefault(key, value)  # a worker configured for another order keeps it
        else:
            env[key] = value
    return env


def environment_change(
    env: Mapping[str, str], inherited: Mapping[str, str], keep: Iterable[str] = ()
) -> tuple[dict[str, str], list[str]]:
    """What turns ``inherited`` (the worker's environment) into ``env``: the variables to set and the names to
    remove. ``command.json`` holds only this — never the worker's whole environment, with whatever secrets it
    has. NNI's variables, the GPU ones and ``keep`` (the spec's own) are always set, even where they happen to
    equal the inherited value: a re-adopting manager reads them there."""
    kept = set(keep)
    overlay = {
        name: value
        for name, value in env.items()
        if inherited.get(name) != value or name.startswith("NNI_") or name in _GPU_VARIABLES or name in kept
    }
    return overlay, sorted(name for name in inherited if name not in env)


_GPU_VARIABLES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
