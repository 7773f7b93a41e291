"""``python -m bench``: every workload on trialfleet (and NNI 3.0 when given), then ``bench/RESULTS.md``.

python -m bench                          # the full suite (about 25 min without NNI, 40 with)
python -m bench --quick                  # a smoke run of a few minutes
python -m bench --nni-venv /tmp/realnni-venv --only launch,ingest
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench import machine, procs, report, suite_data, suite_large, suite_launch, systems
from bench.report import Section
from bench.stats import Figure
from bench.suite import QUICK, Context, Plan

WORKLOADS: dict[str, Callable[[Context], list[Section]]] = {
    "launch": suite_launch.launch,
    "ingest": suite_data.ingest,
    "resume": suite_data.resume,
    "remote": suite_launch.remote,
    "load": suite_launch.load,
    "scale": suite_data.scale,
    "reuse": suite_launch.reuse,
    "stop": suite_launch.stop,
    "large": suite_large.large,
}
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"
TARGETS_HEAD = [
    "## Targets (figures of merit, not assertions)",
    "",
    "| workload | figure | trialfleet | target |",
    "|---|---|---|---|",
]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer trials and repetitions: a smoke run")
    parser.add_argument(
        "--nni-venv",
        type=Path,
        default=os.environ.get("NNI_VENV") or None,
        help="virtualenv with NNI 3.0 (env NNI_VENV); without it NNI's baseline figures are shown",
    )
    parser.add_argument(
        "--only", default=",".join(WORKLOADS), help=f"comma-separated subset of {','.join(WORKLOADS)}"
    )
    parser.add_argument("--trials", type=int, help="trials per launch-overhead run (default 100, quick 20)")
    parser.add_argument("--reps", type=int, help="repetitions per trialfleet figure (default 3, quick 2)")
    parser.add_argument("--nni-reps", type=int, help="repetitions per live NNI figure (default 2, quick 1)")
    parser.add_argument("--results", default=str(RESULTS), help="markdown file to write ('-' for none)")
    parser.add_argument(
        "--update",
        action="store_true",
        help="keep the sections of the existing results file whose workloads are not run now",
    )
    parser.add_argument("--json", type=Path, help="also write the figures as JSON here")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="where experiments are created (default: a new temporary directory, removed after)",
    )
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    unknown = set(args.only.split(",")) - set(WORKLOADS)
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(sorted(unknown))}; choose from {', '.join(WORKLOADS)}")
    return args


def plan_of(args: argparse.Namespace) -> Plan:
    plan = QUICK if args.quick else Plan()
    changes = {"launch_trials": args.trials, "reps": args.reps, "nni_reps": args.nni_reps}
    return dataclasses.replace(plan, **{k: v for k, v in changes.items() if v is not None})


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="trialfleet-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    nni = systems.nni(args.nni_venv) if args.nni_venv else None
    tf = systems.trialfleet(workdir / "trialfleet-home")
    started, load_start = time.strftime("%Y-%m-%d %H:%M %Z"), procs.load_average()
    print(
        f"bench: workdir {workdir}; NNI {'from ' + str(args.nni_venv) if nni else 'baseline file (no --nni-venv)'}; load {load_start}",
        flush=True,
    )
    floors = machine.floors(reps=7)
    ctx = Context(plan_of(args), workdir, tf, nni, floors, log=lambda line: print(line, flush=True))
    sections: list[Section] = []
    try:
        for name in (n for n in WORKLOADS if n in args.only.split(",")):
            print(f"== {name} (load {procs.load_average()})", flush=True)
            sections += WORKLOADS[name](ctx)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    sections.sort(key=lambda s: int(s.number))
    path = None if args.results == "-" else Path(args.results)
    kept_rows, kept = (
        report.kept_parts(path, {s.number for s in sections}) if path and args.update else ([], [])
    )
    header = describe_run(args, started, load_start, floors, nni, updated=bool(kept))
    body = sorted([s.markdown() for s in sections] + kept, key=lambda text: int(text[4:].split(".", 1)[0]))
    rows = sorted(kept_rows + report.target_rows(sections), key=lambda row: int(row[2:].split(".", 1)[0]))
    text = report.document(header, [*TARGETS_HEAD, *rows], body, report.kept_notes(path) if path else "")
    print(text)
    if path:
        path.write_text(text)
    if args.json:
        args.json.write_text(json.dumps([dataclasses.asdict(s) for s in sections], indent=1, default=str))
    return 0


def describe_run(
    args: argparse.Namespace,
    started: str,
    load_start: str,
    floors: dict[str, Figure],
    nni: systems.System | None,
    *,
    updated: bool = False,
) -> list[str]:
    command = " ".join(["python -m bench", *args.argv])
    info = machine.describe()
    scope = "full suite" if args.only == ",".join(WORKLOADS) else f"workloads {args.only}"
    kept = [
        "- sections of other workloads are kept from the previous results file; each says when it was taken"
    ]
    lines = [
        "# Benchmark results: trialfleet and NNI 3.0 on the same machine",
        "",
        f"Taken {started} by `{command}` ({'quick smoke run of the ' if args.quick else ''}{scope}).",
        "",
        f"- machine: {info['cpu']}, {info['cores']} cores, {info['memory']}, Linux {info['kernel']}",
        f"- python: {info['python']}",
        f"- NNI column: {nni_source(nni)}",
        f"- load average (1/5/15 min): {load_start} at the start, {procs.load_average()} at the end; each section shows it before it ran",
        "- figures: median of the repetitions, (min..max) after it; the ratio is NNI's median over trialfleet's",
        *(kept if updated else []),
        "",
        "Bare floors of this machine (median of 7):",
        "",
        "| process | seconds |",
        "|---|---|",
        *(
            f"| {name} | {figure.median:.4f} ({figure.low:.4f}..{figure.high:.4f}) |"
            for name, figure in floors.items()
        ),
        "",
    ]
    return lines


def nni_source(nni: systems.System | None) -> str:
    if nni is None:
        return "NNI (baseline file, not re-measured): figures of shared/bench/nni-baseline.md, taken on this machine kind"
    version = subprocess.run(
        [nni.python, "-c", "import nni; print(nni.__version__)"], capture_output=True, text=True, check=False
    )
    return f"NNI {version.stdout.strip() or '?'} measured live in this run ({nni.cli[0]})"


if __name__ == "__main__":
    raise SystemExit(main())
