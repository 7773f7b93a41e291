"""``trial ls``, ``trial kill`` and ``top``."""

from __future__ import annotations

import time
from typing import Any

import typer

from trialfleet.cli import trial_list
from trialfleet.cli.output import (
    console,
    fmt_duration,
    fmt_time,
    metric_value,
    parameters_of,
    print_json,
    print_table,
    short_json,
    success,
)

app = typer.Typer(help="List and kill trials.", no_args_is_help=True)

IdArgument = typer.Argument(None, help="experiment id (default: the running experiment)")
JsonOption = typer.Option(False, "--json", help="NNI's JSON instead of a table")


def _with_dates(job: dict[str, Any]) -> dict[str, Any]:
    """nnictl prints startTime/endTime as dates."""
    return {k: fmt_time(v) if k in ("startTime", "endTime") else v for k, v in job.items()}


def trial_rows(jobs: list[dict[str, Any]], *, platform: bool = False) -> list[tuple[Any, ...]]:
    """One row per trial; with ``platform`` (a hybrid experiment) the platform it runs on after its status."""
    rows = []
    for job in jobs:
        start, end = job.get("startTime"), job.get("endTime")
        duration = (end - start) / 1000 if start is not None and end is not None else None
        value = metric_value(job)
        where = (job.get("platform") or "",) if platform else ()
        rows.append(
            (
                job["trialJobId"],
                job.get("sequenceId"),
                job["status"],
                *where,
                fmt_time(start),
                fmt_duration(duration),
                "" if value is None else short_json(value),
                short_json(parameters_of(job)),
            )
        )
    return rows


TRIAL_COLUMNS = ["trial", "#", "status", "start", "duration", "default metric", "parameters"]
HYBRID_TRIAL_COLUMNS = [*TRIAL_COLUMNS[:3], "platform", *TRIAL_COLUMNS[3:]]


@app.command("ls")
def list_trials(
    experiment_id: str | None = IdArgument,
    head: int | None = typer.Option(None, "--head", min=1, help="the N best trials (highest default metric)"),
    tail: int | None = typer.Option(None, "--tail", min=1, help="the N worst trials (lowest default metric)"),
    every: bool = typer.Option(
        False, "--all", help=f"every trial (plain tab-separated lines past {trial_list.PLAIN_AFTER:,})"
    ),
    as_json: bool = JsonOption,
) -> None:
    """List the trials of an experiment: every trial up to 50, else the counts, the newest and the best."""
    from trialfleet.client import open_experiment, resolve_experiment
    from trialfleet.tuning.catalog import configured_optimize_mode

    client = open_experiment(resolve_experiment(experiment_id))
    try:
        params = client.profile()["params"]
        columns, hybrid = _columns(params)
        table = trial_list.TableOf(columns, lambda jobs: trial_rows(jobs, platform=hybrid))
        if head or tail:
            jobs = trial_list.ranked(client, head or tail or 0, highest=bool(head))
            _print_jobs(f"experiment {client.experiment_id}: {len(jobs)} trials", table, jobs, as_json)
            return
        total, counts = trial_list.trial_total(client)
        if every or as_json or total <= trial_list.SUMMARY_AFTER:
            jobs = client.trial_jobs()
            _print_jobs(f"experiment {client.experiment_id}: {len(jobs)} trials", table, jobs, as_json)
            return
        maximize = configured_optimize_mode(params) == "maximize"
        trial_list.print_summary(client, total, counts, maximize=maximize, table=table)
    finally:
        client.close()


def _columns(params: dict[str, Any]) -> tuple[list[str], bool]:
    hybrid = isinstance(params.get("trainingService"), list)
    return (HYBRID_TRIAL_COLUMNS if hybrid else TRIAL_COLUMNS), hybrid


def _print_jobs(title: str, table: trial_list.TableOf, jobs: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print_json([_with_dates(j) for j in jobs])
    else:
        trial_list.print_every(title, table, jobs)


@app.command("kill")
def kill_trial(
    experiment_id: str | None = IdArgument,
    trial_id: str = typer.Option(..., "--trial_id", "-T", help="the trial to cancel"),
) -> None:
    """Cancel a trial (USER_CANCELED): its whole process tree is stopped."""
    from trialfleet.client import open_experiment, resolve_experiment

    client = open_experiment(resolve_experiment(experiment_id))
    try:
        client.cancel_trial(trial_id)
    finally:
        client.close()
    success(f"Cancel trial {trial_id} success.")


def top(interval: int = typer.Option(3, "--time", "-t", min=1, help="seconds between refreshes")) -> None:
    """Show the running experiments and their trials, refreshed until Ctrl-C."""
    try:
        while True:
            _show_running()
            time.sleep(interval)
    except KeyboardInterrupt:
        return


def _show_running() -> None:
    from trialfleet.client import all_experiments, rest_client
    from trialfleet.errors import TrialfleetError

    out = console()
    out.clear()
    running = [r for r in all_experiments() if r.running]
    if not running:
        out.print("There is no experiment running.")
    for ref in running:
        out.print(
            f"Id: {ref.id}  Status: {ref.status}  Port: {ref.entry.get('port')}  "
            f"Platform: {ref.entry.get('platform')}  StartTime: {fmt_time(ref.entry.get('startTime'))}"
        )
        client = rest_client(ref)
        try:
            print_table(None, TRIAL_COLUMNS, trial_rows(client.trial_jobs()))
        except TrialfleetError as exc:
            out.print(str(exc), style="red")
        finally:
            client.close()
