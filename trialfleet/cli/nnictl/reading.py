"""nnictl's commands on an existing experiment (trials, profile, list, export/import, updates, logs), printed as
nnictl prints them, through the same client as ``trialfleet``'s (REST while running, the database after)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialfleet.cli.nnictl import output
from trialfleet.cli.output import metric_value

if TYPE_CHECKING:
    from trialfleet.client import ExperimentClient
    from trialfleet.manager.standby import StandbyManager


@contextmanager
def _client(experiment_id: str | None) -> Iterator[ExperimentClient]:
    from trialfleet.client import open_experiment, resolve_experiment

    client = open_experiment(resolve_experiment(experiment_id))
    try:
        yield client
    finally:
        client.close()


def select(jobs: list[dict[str, Any]], head: int | None, tail: int | None) -> list[dict[str, Any]]:
    """nnictl's --head/--tail: only trials with a final metric, best (highest) first / lowest first."""
    if not head and not tail:
        return jobs
    scored = [j for j in jobs if isinstance(metric_value(j), (int, float))]
    scored.sort(key=lambda j: float(metric_value(j)), reverse=bool(head))
    return scored[: head or tail]


def trial_ls(args: argparse.Namespace, _: StandbyManager | None) -> None:
    if args.head and args.tail:
        output.error("Head and tail cannot be set at the same time.")
        return
    with _client(args.id) as client:
        jobs = select(client.trial_jobs(), args.head, args.tail)
    output.dump([output.with_dates(job) for job in jobs])


def trial_kill(args: argparse.Namespace, _: StandbyManager | None) -> None:
    with _client(args.id) as client:
        client.cancel_trial(args.trial_id)
    print()  # nnictl prints the response's body, which NNI's manager leaves empty


def experiment_show(args: argparse.Namespace, _: StandbyManager | None) -> None:
    with _client(args.id) as client:
        output.dump(output.with_dates(client.profile()))


def experiment_status(args: argparse.Namespace, _: StandbyManager | None) -> None:
    with _client(args.id) as client:
        output.dump(client.check_status())


def experiment_list(args: argparse.Namespace, _: StandbyManager | None) -> None:
    from trialfleet.client import all_experiments

    refs = all_experiments()
    if not refs:
        output.info("Cannot find experiments.")
        raise SystemExit(1)
    shown = [r for r in refs if args.all or r.running]
    if not shown:
        output.warning(
            "There is no experiment running...\nYou can use 'nnictl experiment list --all' to list all experiments."
        )
    print(output.experiment_lines([(r.id, dict(r.entry), r.status) for r in shown]))


def experiment_export(args: argparse.Namespace, _: StandbyManager | None) -> None:
    from trialfleet import export

    with _client(args.id) as client:
        records = client.export_data()
        if args.intermediate:
            records = export.with_intermediate(records, client.metric_data(type="PERIODICAL"))
    if args.type == "csv" and not records:
        output.error("No trial results collected! Please check your trial log...")
        return
    Path(args.path).write_text(export.render(records, args.type))


def experiment_import(args: argparse.Namespace, _: StandbyManager | None) -> None:
    from trialfleet.export import load_import_file

    records = load_import_file(args.filename)
    with _client(args.id) as client:
        client.import_data(records)


def _update(experiment_id: str | None, update_type: str, key: str, value: Any, name: str) -> None:
    with _client(experiment_id) as client:
        client.update_profile(update_type, key, value)
    output.info(f"Update {name} success!")


def _digits(value: str, low: int, high: int) -> int:
    if not value.isdigit() or not low <= int(value) <= high:
        raise ValueError(f"value ({value}) must be a digit from {low} to {high}")
    return int(value)


def update_concurrency(args: argparse.Namespace, _: StandbyManager | None) -> None:
    value = _digits(args.value, 1, 1000)
    _update(args.id, "TRIAL_CONCURRENCY", "trialConcurrency", value, "concurrency")


def update_trialnum(args: argparse.Namespace, _: StandbyManager | None) -> None:
    value = _digits(args.value, 1, 999999999)
    _update(args.id, "MAX_TRIAL_NUM", "maxTrialNumber", value, "trialnum")


def update_duration(args: argparse.Namespace, _: StandbyManager | None) -> None:
    from trialfleet.config import parse_time

    if not re.fullmatch(r"\d+[smhd]?", args.value):
        raise ValueError("the unit of time should in {'s', 'm', 'h', 'd'}")
    _update(args.id, "MAX_EXEC_DURATION", "maxExperimentDuration", parse_time(args.value), "duration")


def update_searchspace(args: argparse.Namespace, _: StandbyManager | None) -> None:
    from trialfleet.config.files import read_search_space
    from trialfleet.errors import ConfigError

    try:
        space = read_search_space(Path(args.filename))
    except ValueError as exc:
        raise ConfigError(str(exc), file=args.filename) from exc
    _update(args.id, "SEARCH_SPACE", "searchSpace", space, "searchSpace")


def _log(args: argparse.Namespace, names: tuple[str, ...]) -> None:
    """nnictl prints the file (``head -N`` / ``tail -N`` of it); here the manager's log comes first, then what
    its process wrote to stdout, as one text."""
    from trialfleet.cli.logs import select_lines
    from trialfleet.client import resolve_experiment

    log_dir = resolve_experiment(args.id).experiment_dir / "log"
    text = "".join((log_dir / n).read_text(errors="replace") for n in names if (log_dir / n).is_file())
    print(select_lines(text, args.head, None if args.head else args.tail))


def log_stdout(args: argparse.Namespace, _: StandbyManager | None) -> None:
    from trialfleet.layout import MANAGER_LOG, MANAGER_STDOUT_LOG, NNI_MANAGER_LOG

    _log(args, (NNI_MANAGER_LOG, MANAGER_LOG, MANAGER_STDOUT_LOG))


def log_stderr(args: argparse.Namespace, _: StandbyManager | None) -> None:
    from trialfleet.layout import MANAGER_STDERR_LOG

    _log(args, (MANAGER_STDERR_LOG,))


def log_trial(args: argparse.Namespace, _: StandbyManager | None) -> None:
    with _client(args.id) as client:
        paths = {job["trialJobId"]: job.get("logPath") for job in client.trial_jobs()}
    if args.trial_id:
        if args.trial_id not in paths:
            output.error(f"Trial id {args.trial_id} not correct, please check your command!")
            raise SystemExit(1)
        output.info(f"id:{args.trial_id} path:{paths[args.trial_id]}")
        return
    output.info("All of trial log info:")
    for trial_id, path in paths.items():
        if path:
            output.info(f"id:{trial_id} path:{path}")
    if not any(paths.values()):
        output.info("None")


def config_show(args: argparse.Namespace, _: StandbyManager | None) -> None:
    import json

    with _client(args.id) as client:
        print(json.dumps(client.profile()["params"], indent=4))


def webui_url(args: argparse.Namespace, _: StandbyManager | None) -> None:
    from trialfleet.client import resolve_experiment

    ref = resolve_experiment(args.id)
    output.info(f"Web UI url: {ref.url if ref.running else ''}")
