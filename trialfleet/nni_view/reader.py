"""The read side of an experiment in NNI's payload shapes, straight from its store.

The REST server answers its GET routes with it (over the running manager's store), and the CLI and the
Python API use it to read stopped experiments from their database. Every list is built from a fixed number
of indexed queries, never one query per trial, so it stays fast at 10,000 trials and 100,000 metrics.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from trialfleet.nni_view import payloads
from trialfleet.status import TrialStatus
from trialfleet.storage import ExperimentStore, TrialRow
from trialfleet.training_services.naming import attempt_name
from trialfleet.training_services.trial_dir import read_local_file

#: records per chunk of a whole list built chunk by chunk (see ``trial_job_chunks``)
LIST_CHUNK = 1000


class ExperimentReader:
    def __init__(self, store: ExperimentStore, experiment_dir: Path) -> None:
        self.store = store
        self.experiment_dir = experiment_dir

    # ---- trials ------------------------------------------------------------------------------------

    def trial_jobs(
        self,
        status: TrialStatus | None = None,
        *,
        offset: int = 0,
        limit: int | None = None,
        sort: str = "sequenceId",
        descending: bool = False,
    ) -> list[dict[str, Any]]:
        order = ("-" if descending else "") + sort
        rows = self.store.trials(status=status, offset=offset, limit=limit, order=order)
        return self._job_infos(rows, page=limit is not None)

    def _job_infos(self, rows: list[TrialRow], *, page: bool) -> list[dict[str, Any]]:
        """TrialJobInfos of ``rows``: a page reads its trials' final metrics by index; the whole list scans
        them once. Which trials have one is the store's rule (``sql.final_sql``), as on every page."""
        if not rows:
            return []
        found = self.store.final_metrics([r.id for r in rows] if page else None)
        finals = payloads.first_final_metrics(found)
        return [payloads.trial_job_info(r, finals.get(r.id)) for r in rows]

    def trial_job_chunks(self, size: int = LIST_CHUNK) -> Iterator[list[dict[str, Any]]]:
        """Every trial's TrialJobInfo in sequence order, ``size`` trials at a time, so that whoever encodes the
        list never holds every trial's row and payload at once. Trials are only ever appended in sequence
        order, so paging by offset neither skips nor repeats one while others are added."""
        offset = 0
        while True:
            rows = self.store.trials(offset=offset, limit=size)
            yield self._job_infos(rows, page=True)
            if len(rows) < size:
                return
            offset += size

    def trial_jobs_with_ids(self, trial_ids: Sequence[str]) -> list[dict[str, Any]]:
        """The TrialJobInfos of these trials (those that exist), by sequence id."""
        return self._job_infos(self.store.trials_with_ids(trial_ids), page=True)

    def trial_count(self, status: TrialStatus | None = None) -> int:
        counts = self.store.trial_counts()
        return counts.get(status, 0) if status is not None else sum(counts.values())

    def trial_job(self, trial_id: str) -> dict[str, Any] | None:
        row = self.store.find_trial(trial_id)
        if row is None:
            return None
        final = payloads.first_final_metrics(self.store.final_metrics([trial_id]))
        return payloads.trial_job_info(row, final.get(trial_id))

    def job_statistics(self) -> list[dict[str, Any]]:
        return payloads.job_statistics(self.store.trial_counts())

    # ---- metrics -----------------------------------------------------------------------------------

    def metric_data(self, trial_id: str | None = None, type: str | None = None) -> list[dict[str, Any]]:
        return [payloads.metric_record(m) for m in self.store.metrics(trial_id, type=type)]

    def metric_data_chunks(
        self, type: str | None = None, size: int = LIST_CHUNK, *, after: int = 0, up_to: int | None = None
    ) -> Iterator[list[dict[str, Any]]]:
        """Every trial's MetricDataRecords in the order stored (those with ids after ``after`` and up to
        ``up_to``), ``size`` at a time (paged by id: metrics are only ever appended)."""
        while True:
            rows = self.store.metrics(type=type, after_id=after, up_to_id=up_to, limit=size)
            yield [payloads.metric_record(m) for m in rows]
            if len(rows) < size:
                return
            after = rows[-1].id

    def metric_data_range(self, low: int, high: int) -> list[dict[str, Any]]:
        return [payloads.metric_record(m) for m in self.store.metrics_for_sequence_range(low, high)]

    def metric_data_latest(self) -> list[dict[str, Any]]:
        return [payloads.metric_record(m) for m in self.store.latest_metrics()]

    # ---- experiment --------------------------------------------------------------------------------

    def profile(self, params: Mapping[str, Any], exec_duration: float | None = None) -> dict[str, Any]:
        row = self.store.experiment()
        duration = row.exec_duration if exec_duration is None else exec_duration
        return payloads.experiment_profile(row, params, duration, str(self.experiment_dir))

    def export_data(self) -> list[dict[str, Any]]:
        hybrid = isinstance(self.store.experiment().config.get("trainingService"), list)
        return payloads.export_records(self.store.trials(status=TrialStatus.SUCCEEDED), platform=hybrid)

    def imported_data(self) -> list[str]:
        return self.store.imported_data()

    # ---- files of trials that no manager serves (stopped or viewed experiments) ---------------------

    def trial_dir(self, row: TrialRow) -> Path:
        handle = row.handle or {}
        # a platform whose trials see their directory elsewhere (a container's mount of the storage) says where
        # this machine sees it
        if isinstance(handle.get("trial_dir_here"), str):
            return Path(handle["trial_dir_here"])
        if isinstance(handle.get("trial_dir"), str):
            return Path(handle["trial_dir"])
        if row.location and row.location.startswith("local:"):
            return Path(row.location.removeprefix("local:"))
        return self.experiment_dir / "trials" / attempt_name(row.id, row.attempt)

    def read_trial_file(self, row: TrialRow, name: str) -> bytes:
        """A file of the trial's directory; FileNotFoundError for a missing one or a name that leaves it."""
        base = self.trial_dir(row)
        try:
            return read_local_file(base, name)
        except ValueError:
            raise FileNotFoundError(f"{name!r} is outside the directory of trial {row.id}") from None
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise FileNotFoundError(f"trial {row.id} has no file {name!r} (looked in {base})") from None
