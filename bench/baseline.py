"""NNI 3.0's figures as measured on this machine kind, taken from the NNI baseline report
(``shared/bench/nni-baseline.md`` and the JSON summaries of ``nni_baseline/results_baseline/``).

Used for the NNI column when no NNI installation is given, labelled "baseline file, not re-measured".
Each value is (median, min, max) over the baseline's repetitions. NNI's manager is two processes, the
node manager and the Python dispatcher (which runs the tuner, as trialfleet's manager does in-process):
their RSS and CPU are added here (medians added). Its wall times run from ``nnictl create`` to DONE seen
by a 0.2 s poll, 0.1 to 0.5 s after the last trial's end.
"""

from __future__ import annotations

from bench.stats import Figure

SOURCE = "shared/bench/nni-baseline.md"


def _f(median: float, low: float | None = None, high: float | None = None, reps: int = 3) -> Figure:
    return Figure(median, median if low is None else low, median if high is None else high, reps)


#: launch overhead, keyed by (trial kind, concurrency); kind "sdk" is NNI's stdlib-HTTP "light" trial
LAUNCH: dict[tuple[str, int], dict[str, Figure]] = {
    ("nni", 2): {
        "wall_s": _f(163.09, 155.90, 167.16),
        "create_cmd_s": _f(3.20, 3.05, 3.89),
        "first_running_s": _f(7.13, 6.28, 8.15),
        "gap_median_s": _f(0.711, 0.658, 0.733),
        "gap_p90_s": _f(0.907, 0.905, 0.965),
        "trial_duration_median_s": _f(2.44, 2.30, 2.46),
        "throughput_per_s": _f(0.643, 0.629, 0.670),
        "bare_trial_s": _f(2.241),
        "overhead_per_trial_s": _f(1.021, 0.877, 1.102),
        "manager_cpu_ms_per_trial": _f(47.7 + 27.4),
        "manager_rss_max_mib": _f(78.2 + 142.0),
    },
    ("nni", 8): {
        "wall_s": _f(131.22, 125.55, 139.21),
        "create_cmd_s": _f(3.61, 3.49, 3.81),
        "first_running_s": _f(7.32, 6.84, 7.94),
        "gap_median_s": _f(0.656, 0.639, 0.723),
        "gap_p90_s": _f(0.974, 0.959, 1.012),
        "trial_duration_median_s": _f(9.18, 8.74, 9.75),
        "throughput_per_s": _f(0.810, 0.764, 0.844),
        "bare_trial_s": _f(2.470),
        "overhead_per_trial_s": _f(8.028, 7.574, 8.668),
        "manager_cpu_ms_per_trial": _f(40.9 + 26.4),
        "manager_rss_max_mib": _f(78.2 + 142.0),
    },
    ("sdk", 2): {
        "wall_s": _f(60.68, 60.65, 60.95),
        "create_cmd_s": _f(4.13, 4.11, 4.23),
        "first_running_s": _f(8.15, 8.04, 8.40),
        "gap_median_s": _f(0.933, 0.931, 0.933),
        "trial_duration_median_s": _f(0.127, 0.126, 0.128),
        "throughput_per_s": _f(1.922, 1.918, 1.925),
        "bare_trial_s": _f(0.114),
        "overhead_per_trial_s": _f(1.100, 1.099, 1.105),
        "manager_cpu_ms_per_trial": _f(34.8 + 28.3),
    },
    ("sdk", 8): {
        "wall_s": _f(24.79, 24.00, 25.06),
        "create_cmd_s": _f(3.73, 3.34, 4.04),
        "first_running_s": _f(7.50, 6.44, 7.76),
        "gap_median_s": _f(1.018, 1.008, 1.032),
        "trial_duration_median_s": _f(0.366, 0.365, 0.367),
        "throughput_per_s": _f(5.90, 5.82, 5.96),
        "bare_trial_s": _f(0.101),
        "overhead_per_trial_s": _f(1.883, 1.819, 1.904),
        "manager_cpu_ms_per_trial": _f(30.2 + 25.1),
    },
}

INGEST: dict[str, Figure] = {
    "lost": _f(0),
    "duplicated": _f(0),
    "reordered": _f(178, 154, 186),
    "trial_report_loop_s": _f(62.88, 62.30, 63.74),
    "trial_reports_per_s": _f(159.0, 156.9, 160.5),
    "last_report_to_all_visible_s": _f(0.196, 0.125, 0.508),
    "end_to_end_metrics_per_s": _f(10_001 / 63.08, 10_001 / 64.26, 10_001 / 62.43),
    "manager_rss_max_mib": _f(167.2 + 141.4),
}

#: after 1,000 light trials at concurrency 8, 2 runs (NNI's largest; it measured no 10,000-trial experiment)
SCALE_1000: dict[str, Figure] = {
    "manager_rss_end_mib": _f(116.0 + 142.4, 116.0 + 141.2, 118.7 + 142.4, 2),
    "manager_cpu_ms_per_trial": _f(30.7, 29.9, 31.5, 2),
}
#: idle REST latency after those 1,000 trials, (median ms, p99 ms), 200 GETs each
SCALE_1000_LATENCY: dict[str, tuple[Figure, Figure]] = {
    "/api/v1/nni/trial-jobs": (_f(44.0, 43.1, 44.9, 2), _f(80.9, 68.3, 93.6, 2)),
    "/api/v1/nni/metric-data": (_f(11.3, 11.0, 11.6, 2), _f(22.3, 21.6, 23.1, 2)),
}

RESUME_NOTE = (
    "NNI 3.0 re-adopts no trial: after `nnictl resume` running trials are re-run from scratch under the same "
    "id (~4 s later), pre-crash metrics are duplicated, the orphaned processes are never reaped, and a resume "
    "within ~20 s on the same port fails (baseline W7)."
)


#: ``nnictl stop`` of the launch workload's experiment (its trials ended or ending), seconds
STOP = {"stop_cmd_s": _f(7.7, 7.5, 8.5)}
STOP_NOTE = (
    "NNI's baseline figure is `nnictl stop` at the end of the launch workload (not 8 running trees); "
    "run with `--nni-venv` for its column here."
)
