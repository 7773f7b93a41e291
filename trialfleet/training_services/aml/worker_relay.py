#!/usr/bin/env python3
"""trialfleet's entry command in a reuse-mode Azure ML job: the worker, with its mailbox carried over MLflow.

Usage: ``python3 -I -S worker_relay.py <support dir> <idle timeout>`` in the job's working directory (the code
snapshot, ``forwarder.py`` beside this script).

Standalone on purpose (stdlib only, Python >= 3.8), as ``forwarder.py``. The worker (``keeper/worker.py``, the same
as on every reuse platform) reads a mailbox in a directory of the job (``outputs/trialfleet-worker/worker``:
``inbox/``, ``cancel/``, ``stop/``), which the manager cannot write: Azure ML shares no directory with it. What the
job and the manager share is the workspace's MLflow, so:

* the manager keeps the worker's mailbox as one tag of the job's own run (``MLFLOW_RUN_ID``), ``trialfleet.mailbox``:
  ``{"give": {<attempt>: <run id>}, "cancel": [<attempt>], "stop": 0|1}``, a state it rewrites whole (no tag is
  ever added per trial: a run holds at most 50);
* each attempt given has an MLflow run of its own, made by the manager as a child of the job's run
  (``mlflow.parentRunId``), whose tags ``trialfleet.inputs`` (the number of pieces) and ``trialfleet.input.<k>``
  hold the attempt's inputs (its parameters, command and environment as JSON, cut into tag values);
* this script reads the mailbox (``runs/get``, every ``POLL`` s while a trial is due, backing off to ``IDLE_POLL``
  while nothing changes; a failed read is tried again at the next look) and turns it into the worker's files: an
  attempt given gets its trial directory (``parameter.cfg``, ``command.json``) from its run's inputs, then
  ``inbox/<attempt>``; a cancel becomes ``cancel/<attempt>``, a stop ``stop/now``. The worker does the rest (it
  takes an attempt once, forks the keeper for it, ends it on a cancel);
* each attempt the worker claimed is shipped into its own run by ``forwarder.Shipper``, exactly as a job of its
  own ships into the job's run (the manager mirrors it and acknowledges);
* once the worker exited (released, idle, or the job cancelled: SIGTERM reaches it), the attempts' files are
  drained (at most ``DRAIN`` s, ``CANCEL_DRAIN`` after a SIGTERM) and the job's run gets
  ``trialfleet.worker.ended``, so a restarted manager does not give it another trial.
"""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

if __package__:  # imported by the manager's tests
    from trialfleet.training_services.aml import forwarder
else:  # the job's entry command; -I leaves the script's directory out of the path
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import forwarder  # type: ignore[no-redef]

MAILBOX_TAG = "trialfleet.mailbox"
ENDED_TAG = "trialfleet.worker.ended"
INPUTS_TAG = "trialfleet.inputs"
INPUT_PREFIX = "trialfleet.input."
#: an attempt's run holds its inputs (up to 8 tags), the files list, the acknowledgement, the parent and the
#: attempt: with 30 slots, 42 of Azure ML's 50 tags of a run
CHILD_SLOTS = 30
POLL = 0.25  # seconds between two reads of the mailbox while a trial is due (after one ended, or given)
IDLE_POLL = 5.0  # the most between two reads while nothing changes
EAGER_FOR = 5.0
TICK = 0.1
SHIP_PERIOD = 0.5  # the most often one attempt's shipper steps (a step may read its run), as the forwarder's
WORK_DIR = "outputs/trialfleet-worker"  # AML keeps ./outputs with the run once it ended


class Mailbox:
    """The job's run's mailbox tag → the worker's files; the attempts it claimed → their runs."""

    def __init__(self, worker_dir, trials_dir, support):
        self.api = forwarder.mlflow_api()
        self.run_id = os.environ["MLFLOW_RUN_ID"]
        self.token = os.environ.get("MLFLOW_TRACKING_TOKEN") or os.environ.get("AZUREML_RUN_TOKEN", "")
        self.worker_dir, self.trials_dir, self.support = worker_dir, trials_dir, support
        self.runs = {}  # attempt -> its run id
        self.delivered = set()  # attempts whose inbox entry was written
        self.cancelled = set()
        self.stopped = False
        self.shippers = {}  # attempt -> Shipper, while its files are not all acknowledged
        self.next_step = {}  # attempt -> when its shipper steps next
        self.seen_ended = set()  # attempts whose result.json was seen
        self.last = None  # the mailbox value last read
        self.next_read = 0.0
        self.interval = POLL
        self.due_until = time.monotonic() + EAGER_FOR  # the first trial is due as soon as the job runs

    def request(self, path, body=None):
        return forwarder.mlflow_request(self.api, self.token, path, body, attempts=1)

    def look(self):
        """Read the mailbox when a read is due; act on what changed."""
        now = time.monotonic()
        if now < self.next_read:
            return
        run = self.request("get?run_id=" + self.run_id)
        value = None
        for tag in ((run or {}).get("run", {}).get("data", {}).get("tags")) or []:
            if tag.get("key") == MAILBOX_TAG:
                value = tag.get("value")
        changed = value is not None and value != self.last
        if value is not None:
            self.last = value
            self.apply(value)  # again when unchanged too: an attempt whose inputs could not be read yet
        due = changed or now < self.due_until
        self.interval = POLL if due else min(self.interval * 1.5, IDLE_POLL)
        self.next_read = now + self.interval

    def apply(self, value):
        try:
            box = json.loads(value)
        except ValueError:
            return
        for attempt, run_id in sorted((box.get("give") or {}).items()):
            if _safe(attempt) and attempt not in self.delivered:
                self.give(attempt, str(run_id))
        for attempt in box.get("cancel") or []:
            if _safe(attempt) and attempt not in self.cancelled:
                _touch(os.path.join(self.worker_dir, "cancel", attempt))
                self.cancelled.add(attempt)
        if box.get("stop") and not self.stopped:
            _touch(os.path.join(self.worker_dir, "stop", "now"))
            self.stopped = True

    def give(self, attempt, run_id):
        """The attempt's trial directory from its run's inputs, then its inbox entry (once)."""
        run = self.request("get?run_id=" + run_id)
        if not run:
            return  # read again at the next change or look
        tags = {t.get("key"): t.get("value") for t in run.get("run", {}).get("data", {}).get("tags") or []}
        inputs = read_inputs(tags)
        if inputs is None:
            sys.stderr.write(f"trialfleet: the inputs of {attempt} are incomplete in run {run_id}\n")
            return
        trial_dir = os.path.join(self.trials_dir, attempt)
        if not os.path.exists(os.path.join(self.worker_dir, "claimed", attempt)):
            write_inputs(trial_dir, inputs)
            _touch(os.path.join(self.worker_dir, "inbox", attempt))
        self.runs[attempt] = run_id
        self.delivered.add(attempt)
        self.due()

    def ship(self):
        """Step the shipper of every attempt the worker claimed; True once all of them are acknowledged."""
        for attempt in _entries(os.path.join(self.worker_dir, "claimed")):
            if attempt in self.runs and attempt not in self.shippers:
                trial_dir = os.path.join(self.trials_dir, attempt)
                self.shippers[attempt] = forwarder.Shipper(trial_dir, self.runs[attempt], CHILD_SLOTS)
        done = True
        now = time.monotonic()
        for attempt, shipper in list(self.shippers.items()):
            ended = os.path.exists(os.path.join(shipper.trial_dir, "result.json"))
            if ended and attempt not in self.seen_ended:  # its end goes out now, and the next trial is due
                self.seen_ended.add(attempt)
                self.next_step[attempt] = now
                self.due()
            if now < self.next_step.get(attempt, now):
                done = False
                continue
            self.next_step[attempt] = now + SHIP_PERIOD  # each step may read the run: not more often
            if shipper.step() and ended:
                del self.shippers[attempt]
                self.runs.pop(attempt, None)
                self.request("update", {"run_id": shipper.run_id, "status": "FINISHED", "end_time": _ms()})
            else:
                done = False
        return done

    def due(self):
        """A trial is due soon (one was given, or one ended): read the mailbox often for a while, from now."""
        self.due_until = time.monotonic() + EAGER_FOR
        self.next_read = min(self.next_read, time.monotonic() + POLL)

    def ended(self, why):
        self.request("set-tag", {"run_id": self.run_id, "key": ENDED_TAG, "value": why[:1000]})


def read_inputs(tags):
    """The attempt's inputs from its run's tags, or None while they are incomplete."""
    try:
        pieces = int(tags[INPUTS_TAG])
        inputs = json.loads("".join(tags[INPUT_PREFIX + str(k)] for k in range(pieces)))
    except (KeyError, TypeError, ValueError):
        return None
    return inputs if isinstance(inputs, dict) else None


def write_inputs(trial_dir, inputs):
    """parameter.cfg and command.json (the keeper's, its environment the trial's own plus this job's paths)."""
    os.makedirs(os.path.join(trial_dir, ".nni"), exist_ok=True)
    with open(os.path.join(trial_dir, "parameter.cfg"), "w") as f:
        f.write(inputs["parameters"])
    env = dict(inputs.get("env") or {})
    env.update(NNI_SYS_DIR=trial_dir, NNI_OUTPUT_DIR=trial_dir, NNI_CODE_DIR=os.getcwd())
    record = {
        "argv": ["/bin/bash", "-c", inputs["command"]],
        "cwd": os.getcwd(),
        "env": env,
        "max_duration": inputs.get("max_duration"),
        "kill_grace": 5.0,
        "protocol": 2,  # keeper.py's PROTOCOL (tested)
    }
    temporary = os.path.join(trial_dir, "command.json.tmp")
    with open(temporary, "w") as f:
        json.dump(record, f)
    os.replace(temporary, os.path.join(trial_dir, "command.json"))


def _safe(attempt):
    return (
        isinstance(attempt, str)
        and attempt not in ("", ".", "..")
        and "/" not in attempt
        and "\0" not in attempt
    )


def _touch(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w"):
        pass


def _entries(path):
    try:
        return sorted(name for name in os.listdir(path) if not name.startswith("."))
    except OSError:
        return []


def _ms():
    return int(time.time() * 1000)


def main(argv):
    support = os.path.abspath(argv[1])
    base = os.path.join(os.getcwd(), WORK_DIR)
    worker_dir, trials_dir = os.path.join(base, "worker"), os.path.join(base, "trials")
    os.makedirs(trials_dir, exist_ok=True)
    mailbox = Mailbox(worker_dir, trials_dir, support)
    script = os.path.join(support, "keeper", "worker.py")
    worker = subprocess.Popen(
        [sys.executable, "-I", "-S", script, worker_dir, trials_dir, argv[2]],
        env=forwarder.keeper_environment(support),
    )
    terminated = []

    def on_term(number, frame):
        terminated.append(number)
        with contextlib.suppress(OSError):
            worker.send_signal(number)

    signal.signal(signal.SIGTERM, on_term)
    print(f"trialfleet: worker running in {base} (each trial's output in trials/<attempt>/)", flush=True)
    while worker.poll() is None:
        mailbox.look()
        mailbox.ship()
        time.sleep(TICK)
    forwarder.drain(mailbox.ship, bool(terminated), "the trials' files")
    why = "the worker ended"
    try:
        with open(os.path.join(worker_dir, "ended.json")) as f:
            why = str(json.load(f).get("reason") or why)
    except (OSError, ValueError):
        pass
    mailbox.ended(why)
    print(f"trialfleet: worker ended ({why})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
