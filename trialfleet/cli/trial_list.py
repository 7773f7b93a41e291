"""What ``trialfleet trial ls`` prints, sized for an experiment of any number of trials.

Up to :data:`SUMMARY_AFTER` trials, every trial in one table. Beyond, a summary: the counts by status, the
:data:`SHOWN` newest trials and the :data:`SHOWN` best (by the experiment's optimize mode), each read as one
page of the trial list (sorted by the store's index, never every trial), and how to see more. ``--all`` lists
every trial: a table up to :data:`PLAIN_AFTER` rows, plain tab-separated lines beyond (a table of 100,000 rows
took rich a minute; plain lines take about a second, and ``grep``/``sort``/``cut`` read them). ``--head N`` /
``--tail N`` are one page each too.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from trialfleet.cli.output import console, metric_value, print_table

if TYPE_CHECKING:
    from trialfleet.client import ExperimentClient

#: more trials than this: ``trial ls`` prints a summary, ``--all`` every trial
SUMMARY_AFTER = 50
#: trials shown in each table of the summary
SHOWN = 10
#: ``--all`` with more trials than this: plain tab-separated lines instead of a table
PLAIN_AFTER = 1000
FINAL_METRIC = "finalMetric"
#: trial ids named on each waiting reason's line
WAITING_IDS = 5


def ranked(client: ExperimentClient, count: int, *, highest: bool) -> list[dict[str, Any]]:
    """The ``count`` succeeded trials with the highest (lowest) numeric default metric (NNI shows the final
    result of succeeded trials only): one page of the sorted list."""
    page = client.trial_page(count, FINAL_METRIC, descending=highest, status="SUCCEEDED")
    return [job for job in page if isinstance(metric_value(job), (int, float))]


def trial_total(client: ExperimentClient) -> tuple[int, dict[str, int]]:
    """The number of trials and their counts by status (``/job-statistics``: kept counts, no scan)."""
    counts = {str(s["trialJobStatus"]): int(s["trialJobNumber"]) for s in client.job_statistics()}
    return sum(counts.values()), counts


def counts_line(experiment_id: str, total: int, counts: dict[str, int]) -> str:
    by_status = ", ".join(f"{status} {n:,}" for status, n in sorted(counts.items()) if n)
    return f"experiment {experiment_id}: {total:,} trials" + (f" ({by_status})" if by_status else "")


def print_summary(
    client: ExperimentClient, total: int, counts: dict[str, int], *, maximize: bool, table: TableOf
) -> None:
    """The counts, the newest trials, the best, and how to list more."""
    out = console()
    out.print(counts_line(client.experiment_id, total, counts), highlight=False)
    newest = client.trial_page(SHOWN, "sequenceId", descending=True)
    table(f"the {len(newest)} newest", newest)
    if counts.get("WAITING"):
        print_waiting(client.trial_jobs(status="WAITING"))
    best = ranked(client, SHOWN, highest=maximize)
    if best:
        table(f"the {len(best)} best ({'highest' if maximize else 'lowest'} default metric)", best)
    else:
        out.print("no trial has a final result yet", highlight=False)
    out.print(
        f"{total - len(newest):,} more: `trialfleet trial ls --all` lists every trial (plain tab-separated "
        f"lines past {PLAIN_AFTER:,}), `--head N` / `--tail N` the N highest / lowest, `--json` NNI's JSON",
        highlight=False,
        markup=False,
    )


class TableOf:
    """Prints trials as a table with the listing's columns (a hybrid experiment's include the platform)."""

    def __init__(self, columns: Sequence[str], rows: Any) -> None:
        self.columns = columns
        self.rows = rows  # (jobs) -> rows

    def __call__(self, title: str | None, jobs: list[dict[str, Any]]) -> None:
        print_table(title, self.columns, self.rows(jobs))


def print_every(title: str, table: TableOf, jobs: list[dict[str, Any]]) -> None:
    """Every trial: a table, or plain tab-separated lines past :data:`PLAIN_AFTER` rows."""
    if len(jobs) <= PLAIN_AFTER:
        table(title, jobs)
        print_waiting(jobs)
        return
    lines = ["\t".join(table.columns)]
    lines += ["\t".join("" if cell is None else str(cell) for cell in row) for row in table.rows(jobs)]
    lines += [f"# {line}" for line in waiting_lines(jobs)]
    sys.stdout.write(f"# {title}\n" + "\n".join(lines) + "\n")
    sys.stdout.flush()


def waiting_lines(jobs: list[dict[str, Any]]) -> list[str]:
    """Why the WAITING trials wait (a full virtual cluster, a quota, a platform's queue), one line per reason
    the platform or the scheduler gave (the trial's ``message``), the most common first."""
    reasons = Counter(job["message"] for job in jobs if job.get("status") == "WAITING" and job.get("message"))
    lines = []
    for reason, count in reasons.most_common():
        ids = [
            job["trialJobId"]
            for job in jobs
            if job.get("status") == "WAITING" and job.get("message") == reason
        ]
        shown = ", ".join(ids[:WAITING_IDS]) + (", ..." if len(ids) > WAITING_IDS else "")
        lines.append(f"waiting ({count}: {shown}): {reason}")
    return lines


def print_waiting(jobs: list[dict[str, Any]]) -> None:
    for line in waiting_lines(jobs):
        console().print(line, highlight=False, markup=False)
