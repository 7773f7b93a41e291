"""``experiment show|status|list|delete|export|import`` and ``config show``."""

from __future__ import annotations

import shutil
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from trialfleet.cli.output import console, fmt_time, print_json, print_table, success, warning

if TYPE_CHECKING:
    from trialfleet.client import ExperimentRef
    from trialfleet.training_services.gpu_leases import Holdings

app = typer.Typer(help="Show, list, delete, export and import experiments.", no_args_is_help=True)
config_app = typer.Typer(help="Show an experiment's config.", no_args_is_help=True)

IdArgument = typer.Argument(None, help="experiment id (default: the running experiment)")


class ExportType(str, Enum):
    json = "json"
    csv = "csv"


def _with_dates(payload: dict[str, Any]) -> dict[str, Any]:
    return {k: fmt_time(v) if k in ("startTime", "endTime") else v for k, v in payload.items()}


@app.command("show")
def show(experiment_id: str | None = IdArgument) -> None:
    """The experiment's profile (NNI's /experiment) as JSON."""
    from trialfleet.client import open_experiment, resolve_experiment

    client = open_experiment(resolve_experiment(experiment_id))
    try:
        print_json(_with_dates(client.profile()))
    finally:
        client.close()


@app.command("status")
def status(experiment_id: str | None = IdArgument) -> None:
    """{status, errors} as JSON."""
    from trialfleet.client import open_experiment, resolve_experiment

    client = open_experiment(resolve_experiment(experiment_id))
    try:
        print_json(client.check_status())
    finally:
        client.close()


@app.command("list")
def list_experiments(
    every: bool = typer.Option(False, "--all", help="stopped experiments too"),
    as_json: bool = typer.Option(False, "--json", help="the manifest entries as JSON"),
) -> None:
    """The running experiments (every experiment with --all)."""
    from trialfleet.client import all_experiments
    from trialfleet.training_services.gpu_leases import machine_holdings

    refs = [r for r in all_experiments() if every or r.running]
    held = machine_holdings()
    if as_json:
        print_json([_with_leases(dict(r.entry), held.get(r.id)) for r in refs])
        return
    if not refs:
        console().print(
            "No experiment is running." + ("" if every else " Use --all to list every experiment.")
        )
        return
    rows = [
        (
            r.id,
            r.entry.get("experimentName") or "",
            r.status,
            r.entry.get("port") or "",
            r.entry.get("platform"),
            fmt_time(r.entry.get("startTime")),
            fmt_time(r.entry.get("endTime")),
            held[r.id].describe() if r.id in held else "",
        )
        for r in refs
    ]
    print_table(None, ["Id", "Name", "Status", "Port", "Platform", "StartTime", "EndTime", "GPUs"], rows)


def _with_leases(entry: dict[str, Any], held: Holdings | None) -> dict[str, Any]:
    """The manifest entry, with what the experiment holds and waits for on this machine's GPUs."""
    if held is not None:
        entry["gpuLeases"] = {"localhost": held.record()}
    return entry


@app.command("delete")
def delete(
    experiment_id: str | None = IdArgument,
    every: bool = typer.Option(False, "--all", help="every stopped experiment"),
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
) -> None:
    """Delete stopped experiments: their directory (database, logs, trials) and manifest entry."""
    from trialfleet.client import all_experiments, resolve_experiment
    from trialfleet.errors import ExperimentStateError

    if every:
        refs = [r for r in all_experiments() if not r.running]
    else:
        refs = [resolve_experiment(experiment_id)]
        if refs[0].running:
            raise ExperimentStateError(f"experiment {refs[0].id} is running; stop it before deleting it")
    if not refs:
        console().print("There is no stopped experiment to delete.")
        return
    if not yes and not typer.confirm(f"Delete {len(refs)} experiment(s): {', '.join(r.id for r in refs)}?"):
        raise typer.Abort()
    for ref in refs:
        _delete(ref)


def _delete(ref: ExperimentRef) -> None:
    from trialfleet.storage import DB_RELATIVE_PATH, manifest

    directory = Path(ref.entry.get("experimentDir") or "")
    # only a directory that really is an experiment's is removed, whatever the manifest says
    if directory.name == ref.id and (directory / DB_RELATIVE_PATH).is_file():
        shutil.rmtree(directory)
        latest = directory.parent / "_latest"
        if latest.is_symlink() and not latest.exists():
            latest.unlink()
    else:
        warning(f"{directory} does not look like the directory of experiment {ref.id}; left in place")
    manifest.remove(ref.id)
    success(f"Experiment {ref.id} deleted.")


@app.command("export")
def export_data(
    experiment_id: str | None = IdArgument,
    export_type: ExportType = typer.Option(..., "--type", "-t", help="json or csv"),
    filename: Path = typer.Option(..., "--filename", "-f", help="the file to write"),
    intermediate: bool = typer.Option(False, "--intermediate", "-i", help="include intermediate results"),
) -> None:
    """Export the parameters and final results of the succeeded trials."""
    from trialfleet import export
    from trialfleet.client import open_experiment, resolve_experiment

    client = open_experiment(resolve_experiment(experiment_id))
    try:
        records = client.export_data()
        if intermediate:
            records = export.with_intermediate(records, client.metric_data(type="PERIODICAL"))
    finally:
        client.close()
    if not records:
        warning("No trial results collected: no trial has succeeded with a final result yet.")
    filename.write_text(export.render(records, export_type.value))
    success(f"Save to {filename} successfully!")


@app.command("import")
def import_data(
    experiment_id: str | None = IdArgument,
    filename: Path = typer.Option(
        ..., "--filename", "-f", help='JSON list of {"parameter": {...}, "value": ...}'
    ),
) -> None:
    """Give the tuner results obtained elsewhere."""
    from trialfleet.client import open_experiment, resolve_experiment
    from trialfleet.export import load_import_file

    records = load_import_file(filename)
    client = open_experiment(resolve_experiment(experiment_id))
    try:
        client.import_data(records)
    finally:
        client.close()
    success(f"Import data success! ({len(records)} records)")


@config_app.command("show")
def config_show(experiment_id: str | None = IdArgument) -> None:
    """The experiment's config (canonical v2 JSON, secrets masked)."""
    from trialfleet.client import open_experiment, resolve_experiment

    client = open_experiment(resolve_experiment(experiment_id))
    try:
        print_json(client.profile()["params"])
    finally:
        client.close()
