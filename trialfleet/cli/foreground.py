"""``create/resume --foreground``: the manager runs in this process; a live panel shows the trials, and the
best trials are listed when the experiment is done (or stopped with Ctrl-C)."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trialfleet.cli.output import console, fmt_duration, print_table, short_json
from trialfleet.status import TrialStatus

if TYPE_CHECKING:
    from rich.console import RenderableType

    from trialfleet.storage import ExperimentStore

_BEST_SHOWN = 10
# `create/resume --foreground` ends with it when the experiment ran but every trial failed (CI scripts see it);
# 1 and 2 are errors of trialfleet itself (TrialfleetError, ConfigError)
EVERY_TRIAL_FAILED = 3


def run(
    experiment_dir: Path,
    action: str,
    sock: socket.socket,
    debug: bool,
    *,
    public_read: bool = False,
    url_prefix: str = "",
) -> int:
    """Serve the experiment until it is DONE, ERROR or stopped; returns the manager's exit code. A manager that
    ends on an error says why (log, experiment's error) and the error is raised as a TrialfleetError."""
    from trialfleet.errors import TrialfleetError
    from trialfleet.manager.process import hold_experiment, record_last_words, setup_logging

    hold_experiment(experiment_dir)
    setup_logging(experiment_dir, debug, console=debug)
    try:
        return asyncio.run(_serve_with_progress(experiment_dir, action, sock, public_read, url_prefix))
    except Exception as exc:  # whatever it is, the manager says why it ends
        reason = record_last_words(experiment_dir, exc)
        raise TrialfleetError(f"experiment {experiment_dir.name} stopped: {reason}") from exc


async def _serve_with_progress(
    experiment_dir: Path, action: str, sock: socket.socket, public_read: bool, url_prefix: str
) -> int:
    from rich.live import Live

    from trialfleet.manager.process import serve
    from trialfleet.server import load_app
    from trialfleet.storage import ExperimentStore

    task = asyncio.create_task(
        serve(
            experiment_dir,
            action,
            sock,
            load_app=load_app,
            exit_when_finished=True,
            public_read=public_read,
            url_prefix=url_prefix,
        )
    )
    store = ExperimentStore.for_experiment_dir(experiment_dir, readonly=True)
    try:
        from trialfleet.tuning.catalog import configured_optimize_mode

        maximize = configured_optimize_mode(store.experiment().config) == "maximize"
        with Live(_panel(store, maximize), console=console(), refresh_per_second=2) as live:
            while not task.done():
                await asyncio.wait({task}, timeout=0.5)
                live.update(_panel(store, maximize))
        console().line()
        code = task.result()
        _print_best(store, maximize)
        if code == 0 and _every_trial_failed(store):
            console().print(f"every trial failed: exit code {EVERY_TRIAL_FAILED}")
            code = EVERY_TRIAL_FAILED
    finally:
        store.close()
    return code


def _every_trial_failed(store: ExperimentStore) -> bool:
    """Trials failed and none ended well (succeeded, or stopped early by the assessor)."""
    counts = store.trial_counts()
    good = counts.get(TrialStatus.SUCCEEDED, 0) + counts.get(TrialStatus.EARLY_STOPPED, 0)
    return bool(counts.get(TrialStatus.FAILED)) and not good


def _best(store: ExperimentStore, maximize: bool, limit: int) -> list[Any]:
    """The best succeeded trials that reported a final result (nulls sort last, so a page holds them first)."""
    trials = store.trials(
        status=TrialStatus.SUCCEEDED, order="-finalMetric" if maximize else "finalMetric", limit=limit
    )
    return [t for t in trials if t.final_value is not None]


def _panel(store: ExperimentStore, maximize: bool) -> RenderableType:
    from rich.panel import Panel

    experiment = store.experiment()
    counts = store.trial_counts()
    parts = [f"{status.value.lower()} {n}" for status, n in counts.items() if n]
    best = _best(store, maximize, 1)
    best_text = (
        f"best {best[0].final_value:.6g} ({best[0].id} {short_json(best[0].hyper_parameters)})"
        if best
        else ""
    )
    body = f"{experiment.status.value}  {fmt_duration(experiment.exec_duration)}  trials: {', '.join(parts) or '-'}"
    text = f"{body}\n{best_text}".rstrip()
    text += _waiting(store, counts.get(TrialStatus.WAITING, 0))
    if counts.get(TrialStatus.FAILED) and not counts.get(TrialStatus.SUCCEEDED):
        text += _first_failure(store)
    # as wide as its text: piped output has a 200-column console (tables are not folded), not a 200-column box
    return Panel(text, title=f"experiment {experiment.id}", title_align="left", expand=False)


def _waiting(store: ExperimentStore, waiting: int) -> str:
    """Why trials wait (a full virtual cluster, a quota, a platform's queue): the reason most of them give."""
    if not waiting:
        return ""
    reasons = Counter(t.message for t in store.trials(status=TrialStatus.WAITING, limit=1000) if t.message)
    if not reasons:
        return ""
    reason, count = reasons.most_common(1)[0]
    return f"\nwaiting ({count} of {waiting}): {reason}"


def _first_failure(store: ExperimentStore) -> str:
    """While every finished trial failed: what the first one wrote to stderr (the manager recorded it)."""
    from trialfleet.manager.experiment_manager import FIRST_FAILURE_EVENT

    events = store.events(event=FIRST_FAILURE_EVENT)
    if not events or not events[0].data:
        return ""
    failure = events[0].data
    return f"\nfirst failure, trial {failure['trialId']} ({failure['message']}); its stderr ends with:\n{failure['stderrTail']}"


def _print_best(store: ExperimentStore, maximize: bool) -> None:
    experiment = store.experiment()
    rows = [
        (t.id, t.sequence_id, f"{t.final_value:.6g}", short_json(t.hyper_parameters))
        for t in _best(store, maximize, _BEST_SHOWN)
    ]
    console().print(f"experiment {experiment.id}: {experiment.status.value}")
    if experiment.error:
        console().print(experiment.error, style="red")
    if rows:
        title = f"best trials ({'max' if maximize else 'min'}imize)"
        print_table(title, ["trial", "#", "default metric", "parameters"], rows)
    elif store.trial_counts().get(TrialStatus.FAILED):
        from rich.text import Text

        console().print(Text.assemble(("no trial succeeded.", "red"), _first_failure(store)))
