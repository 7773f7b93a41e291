"""The scheduler of ``job_manager.take_job_actions``, counting GPUs only.

Jobs holding or wanting resources (``queued``, ``scheduling``, ``running``) are sorted: non-preemptible first,
then running before scheduling before queued, higher priority first, earlier first. Non-preemptible jobs are
allowed while their VC's quota and the cluster have GPUs left; preemptible ones then take what the cluster has
left. A queued job not allowed keeps waiting with a "Waiting for resource" detail; a preemptible job holding
GPUs it is no longer allowed is evicted back to ``queued``.
"""

from __future__ import annotations

from tests.emulators.dlts.config import EmulatorConfig
from tests.emulators.dlts.jobs import Job
from tests.emulators.dlts.vc import job_gpus

_STATUS_ORDER = {"running": 0, "scheduling": 1, "queued": 2}


def _sort_key(job: Job) -> tuple[int, int, int, int]:
    preemptible = 1 if job.params.get("preemptionAllowed") is True else 0
    priority = job.priority if job.priority is not None else 100
    return (preemptible, _STATUS_ORDER[job.status], 999999 - priority, int(job.entered_at))


def _resource(sku: str, gpus: int) -> str:
    return f"{{'gpu': {{'{sku}': {gpus}}}}}"


def plan(jobs: list[Job], config: EmulatorConfig) -> list[tuple[Job, bool, str]]:
    """(job, allowed, waiting message) for every job the scheduler considers, in its order."""
    live = sorted((j for j in jobs if j.status in _STATUS_ORDER), key=_sort_key)
    vc_free = {team.name: team.gpus for team in config.teams}
    cluster_free: dict[str, int] = {}
    for team in config.teams:
        cluster_free[team.sku] = cluster_free.get(team.sku, 0) + team.gpus
    allowed: dict[str, bool] = {}
    for preemptible_pass in (False, True):
        for job in live:
            vc = config.team(job.vc_name)
            if vc is None or (job.params.get("preemptionAllowed") is True) != preemptible_pass:
                continue
            gpus = job_gpus(job)
            fits = cluster_free[vc.sku] >= gpus and (preemptible_pass or vc_free[vc.name] >= gpus)
            if fits:
                cluster_free[vc.sku] -= gpus
                if not preemptible_pass:
                    vc_free[vc.name] -= gpus
            allowed[job.job_id] = fits
    result = []
    for job in live:
        vc = config.team(job.vc_name)
        message = ""
        if vc is not None:
            message = (
                f"Waiting for resource. Job request {_resource(vc.sku, job_gpus(job))}. "
                f"VC schedulable {_resource(vc.sku, vc_free[vc.name])}. "
                f"Cluster schedulable {_resource(vc.sku, cluster_free[vc.sku])}"
            )
        result.append((job, allowed.get(job.job_id, False), message))
    return result


__all__ = ["plan"]
