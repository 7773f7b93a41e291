"""``log stdout|stderr|trial``: the manager's logs and the trials' output."""

from __future__ import annotations

import sys

import typer

from trialfleet.cli.output import console
from trialfleet.layout import MANAGER_LOG, MANAGER_STDERR_LOG, MANAGER_STDOUT_LOG, NNI_MANAGER_LOG

app = typer.Typer(help="Show the logs of an experiment and its trials.", no_args_is_help=True)

IdArgument = typer.Argument(None, help="experiment id (default: the running experiment)")
TailOption = typer.Option(None, "--tail", "-T", min=0, help="only the last N lines")
HeadOption = typer.Option(None, "--head", "-H", min=0, help="only the first N lines")
PathOption = typer.Option(False, "--path", help="print the paths of the log files instead of their content")

#: what each command shows, from the experiment's log directory
_LOG_FILES = {
    "stdout": (MANAGER_LOG, NNI_MANAGER_LOG, MANAGER_STDOUT_LOG),
    "stderr": (MANAGER_STDERR_LOG,),
}


def select_lines(text: str, head: int | None, tail: int | None) -> str:
    lines = text.splitlines(keepends=True)
    if head is not None:
        lines = lines[:head]
    if tail is not None:
        lines = lines[-tail:] if tail else []
    return "".join(lines)


def _print_logs(
    experiment_id: str | None, kind: str, head: int | None, tail: int | None, paths_only: bool
) -> None:
    from trialfleet.client import resolve_experiment

    log_dir = resolve_experiment(experiment_id).experiment_dir / "log"
    for name in _LOG_FILES[kind]:
        path = log_dir / name
        if path.is_file() and paths_only:
            sys.stdout.write(f"{path}\n")
        elif path.is_file():
            console().print(f"==> {path} <==", style="bold")
            sys.stdout.write(select_lines(path.read_text(errors="replace"), head, tail))
            sys.stdout.flush()


@app.command("stdout")
def stdout(
    experiment_id: str | None = IdArgument,
    tail: int | None = TailOption,
    head: int | None = HeadOption,
    path: bool = PathOption,
) -> None:
    """The manager's log and the detached process's stdout."""
    _print_logs(experiment_id, "stdout", head, tail, path)


@app.command("stderr")
def stderr(
    experiment_id: str | None = IdArgument,
    tail: int | None = TailOption,
    head: int | None = HeadOption,
    path: bool = PathOption,
) -> None:
    """The detached manager process's stderr."""
    _print_logs(experiment_id, "stderr", head, tail, path)


@app.command("trial")
def trial(
    experiment_id: str | None = IdArgument,
    trial_id: str | None = typer.Option(None, "--trial_id", "-T", help="one trial (default: all)"),
    show_stdout: bool = typer.Option(False, "--stdout", help="print the trial's stdout"),
    show_stderr: bool = typer.Option(False, "--stderr", help="print the trial's stderr"),
) -> None:
    """Where each trial's logs are (``id:<trial> path:<logPath>``), or their content."""
    from trialfleet.client import open_experiment, resolve_experiment

    client = open_experiment(resolve_experiment(experiment_id))
    try:
        jobs = [client.trial_job(trial_id)] if trial_id else client.trial_jobs()
        for job in jobs:
            console().print(f"id:{job['trialJobId']} path:{job.get('logPath', '')}")
            for wanted, name in ((show_stdout, "stdout"), (show_stderr, "stderr")):
                if wanted:
                    text = client.trial_file(job["trialJobId"], name).decode("utf-8", errors="replace")
                    sys.stdout.write(text if text.endswith("\n") or not text else text + "\n")
                    sys.stdout.flush()
    finally:
        client.close()
