"""Names, labels and annotations of a trial attempt's resource, valid for Kubernetes and for each CRD's rules.

NNI named a trial's job ``nni-exp-<exp>-trial-<trial>`` (Kubeflow, AdaptDL: lower case, DNS-1035) or
``nniexp<exp>trial<trial>`` (FrameworkController: ``^[a-z0-9]{1,63}$``). Trial ids have upper-case letters and
every attempt needs a name of its own, so trialfleet keeps NNI's shape, adds ``attempt<n>`` from the second
attempt on, and, when lower-casing or shortening lost something, a digest of the exact ids: two attempts never
share a name, and the same attempt always gets the same one (``submit`` finds it again by name).
The operators build their replicas' names from the job's, and some of those names are capped at 63 characters
too, so a platform asks for ``room``: the training operator's Services ``<job>-<replicatype>-<index>`` (DNS-1035
labels), AdaptDL's pod hostnames ``<job>-<group>-<rank>`` (DNS-1123 labels). The name is shortened (with the
digest) to leave that room; it stays the same for the same attempt and config.
NNI's labels ``app``, ``expId``, ``trialId`` are kept, with the attempt beside them; NNI's job name
(``nni_exp_<exp>_trial_<trial>``) is an annotation.
"""

from __future__ import annotations

import hashlib
import re

from trialfleet.training_services.naming import nni_job_name

APP = "nni-kubernetes-trial"
ATTEMPT_LABEL = "trialfleet.io/attempt"
WORKER_LABEL = "trialfleet.io/worker"
WORKER_DIR_ANNOTATION = "trialfleet.io/worker-dir"
JOB_NAME_ANNOTATION = "trialfleet.io/nni-job-name"
TRIAL_DIR_ANNOTATION = "trialfleet.io/trial-dir"
MAX_NAME = 63
_LABEL_VALUE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def resource_name(
    experiment_id: str,
    trial_id: str,
    attempt: int,
    *,
    compact: bool = False,
    room: int = 0,
    kind: str = "trial",
) -> str:
    """``nni-exp-<exp>-trial-<trial>[-attempt-<n>][-<digest>]``; ``compact``: FrameworkController's ``[a-z0-9]``.

    At most ``MAX_NAME - room`` characters: ``room`` is what the operator appends to build its replicas' names.
    ``kind="env"`` with a worker's name in place of the trial id: a reuse-mode worker (NNI's environment,
    ``nni-exp-<exp>-env-<id>``).
    """
    limit = MAX_NAME - room
    words = ["nni", "exp", experiment_id, kind, trial_id] + (["attempt", str(attempt)] if attempt else [])
    separator, unwanted = ("", r"[^a-z0-9]") if compact else ("-", r"[^a-z0-9-]")
    kept = [re.sub(unwanted, "", word.lower()) for word in words]
    name = separator.join(kept)
    if name == separator.join(words) and len(name) <= limit:
        return name
    digest = hashlib.sha256(f"{experiment_id}\0{trial_id}\0{attempt}".encode()).hexdigest()[:8]
    # the experiment id gives way first: every trial of the experiment shares it, the trial's part tells them apart
    overflow = len(name) + len(separator) + len(digest) - limit
    kept[2] = kept[2][: max(len(kept[2]) - overflow, 0)].rstrip("-")
    head = separator.join(kept)[: limit - len(digest) - len(separator)].rstrip("-")
    return f"{head}{separator}{digest}"


def label_value(what: str, value: str) -> str:
    if len(value) > MAX_NAME or not _LABEL_VALUE.fullmatch(value):
        raise ValueError(f"{what} {value!r} cannot be a Kubernetes label value")
    return value


def trial_labels(experiment_id: str, trial_id: str, attempt: int) -> dict[str, str]:
    return {
        "app": APP,
        "expId": label_value("experiment id", experiment_id),
        "trialId": label_value("trial id", trial_id),
        ATTEMPT_LABEL: str(attempt),
    }


def worker_labels(experiment_id: str, worker: str) -> dict[str, str]:
    """A reuse-mode worker's resource and pods: the experiment's labels (its informers see them) and the worker's."""
    return {"app": APP, "expId": label_value("experiment id", experiment_id), WORKER_LABEL: worker}


def experiment_selector(experiment_id: str) -> str:
    """Every resource (and pod) of the experiment: how a resumed manager finds its trials again."""
    return f"app={APP},expId={label_value('experiment id', experiment_id)}"


def trial_annotations(experiment_id: str, trial_id: str, trial_dir: str) -> dict[str, str]:
    return {JOB_NAME_ANNOTATION: nni_job_name(experiment_id, trial_id), TRIAL_DIR_ANNOTATION: trial_dir}


def same_attempt(labels: dict[str, str] | None, experiment_id: str, trial_id: str, attempt: int) -> bool:
    """Whether a resource found under this attempt's name is this attempt's (not an unrelated one's)."""
    return dict(labels or {}).items() >= trial_labels(experiment_id, trial_id, attempt).items()
