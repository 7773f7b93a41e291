#!/usr/bin/env python3
"""trialfleet's entry command in an Azure ML job: run the trial keeper, ship the trial directory to MLflow.

Usage: ``python3 -I -S forwarder.py <support dir>`` in the job's working directory (the code snapshot).

Standalone on purpose (stdlib only, Python >= 3.8): it runs in the job's image, where nothing of trialfleet is
installed. The manager cannot read the job's disk and the job may not reach the manager, but every AML job can
reach its workspace's MLflow tracking server (``MLFLOW_TRACKING_URI``, ``MLFLOW_RUN_ID`` = the job's name,
``MLFLOW_TRACKING_TOKEN``), so that is the channel, kept within Azure ML's documented limits of a run (50 tags,
keys of 100 characters, values of 1,000: "Service limits in Azure Machine Learning") and MLflow's of a request
(``log-batch``: 100 tags, 1 MB; ``mlflow/utils/validation.py``):

* it writes the trial directory (``parameter.cfg``, ``command.json``) from the job's environment and runs the
  keeper on it, with NNI's variables and the ``nni`` shim (unless the image has a real ``nni``);
* the run's tags are a window of ``SLOTS`` slots the manager acknowledges: ``trialfleet.files`` lists the files,
  ``trialfleet.slot.<k>`` holds ``<file index>:<offset>:<base64 of up to PIECE bytes>``, and the manager sets
  ``trialfleet.ack`` to the bytes of each file its mirror holds. Every half second the window is refilled from
  what is not acknowledged yet, in order: the metric stream, the keeper's records, the rest, ``result.json``
  last (in the window that holds the rest of everything before it, or once that is acknowledged: the manager
  applies a window whole before it looks, so whoever sees the trial's end has every byte before it). A request
  that fails is simply sent again later: nothing is dropped until acknowledged;
* the trial's logs and other files reach the manager up to ``FILE_CAP`` bytes each (the metric stream and the
  keeper's records whole): a 50 MB log would take an hour through 50 tags. The whole directory stays in the
  job's ``./outputs``, which Azure ML keeps with the run;
* SIGTERM (AML cancelling the job) reaches the keeper, which ends the trial's tree; this process goes on until
  everything is acknowledged (at most ``DRAIN`` seconds, ``CANCEL_DRAIN`` after a SIGTERM: the manager asked for
  the end it gets, and Azure ML kills what outlives its grace), then exits with the trial's exit code.
"""

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

SLOTS = 36  # + trialfleet.files, trialfleet.ack, the job's 3 tags: 41 of 50, room for Azure's own
PIECE = 720  # bytes per slot: 960 base64 characters and a short prefix, within a tag value of 1,000
FILE_CAP = 256 * 1024  # what reaches the manager of a log or other file; the whole stays in ./outputs
WHOLE = (".nni/metrics", "keeper.json", "result.json")  # shipped whole, first (result.json last)
FILES_LIMIT = 1000  # characters of the trialfleet.files tag
FILES_MAX = 80  # files shipped: the manager's acknowledgement (their sizes) must fit a tag value too
DRAIN = 300.0  # seconds the job waits, after the trial ended, for the manager to acknowledge the rest
CANCEL_DRAIN = 2.0  # the same after a SIGTERM
TRIAL_DIR = "outputs/trialfleet-trial"  # AML keeps ./outputs as the run's artifacts once it ended
ENV_PREFIX = "TRIALFLEET_AML_"


def _identity(path):
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino)


def private_file(trial_dir):
    """The (device, inode) of the trial directory's command.json, or None."""
    return _identity(os.path.join(trial_dir, "command.json"))


def mlflow_api():
    """The job's MLflow runs API, from the variables Azure ML sets in every job."""
    uri = os.environ["MLFLOW_TRACKING_URI"]
    if uri.startswith("azureml://"):  # what the azureml-mlflow plugin does
        uri = "https://" + uri[len("azureml://") :]
    return uri.rstrip("/") + "/api/2.0/mlflow/runs/"


class Shipper:
    """Ships one trial directory into one MLflow run: the job's own (``MLFLOW_RUN_ID``), or a reuse-mode worker's
    child run of the attempt, whose other tags (its inputs) leave room for fewer ``slots``."""

    def __init__(self, trial_dir, run_id=None, slots=SLOTS):
        self.api = mlflow_api()
        self.run_id = run_id or os.environ["MLFLOW_RUN_ID"]
        self.slots = slots
        self.token = os.environ.get("MLFLOW_TRACKING_TOKEN") or os.environ.get("AZUREML_RUN_TOKEN", "")
        self.trial_dir = trial_dir
        self.files = []  # relative paths, in the order first seen: a file's index names it in the slots
        self.acked = []  # per file index: the bytes the manager's mirror holds
        self.capped = set()
        self.window = None  # the slots last posted
        self.batches = 0
        self.refused = 0.0  # when MLflow last refused a window (then it is sent again 10 s later)

    def scan(self):
        """The trial directory's files, in shipping order, with the bytes of each that may be shipped."""
        found = []
        private = private_file(self.trial_dir)
        for root, dirs, names in os.walk(self.trial_dir):
            dirs.sort()
            for name in sorted(names):
                path = os.path.join(root, name)
                if name.endswith(".tmp") or ".tmp." in name or not os.path.isfile(path):
                    continue  # a record being written atomically: shipped once renamed
                if os.path.islink(path) or _identity(path) == private:
                    # the keeper's private input (the manager wrote it, it holds environment values), also
                    # through a link the trial made to it: a link is not shipped, a hard link is the same file
                    continue
                found.append(os.path.relpath(path, self.trial_dir))
        found.sort(key=_shipping_order)
        sizes = {}
        for relative in found:
            size = os.path.getsize(os.path.join(self.trial_dir, relative))
            if relative not in WHOLE and size > FILE_CAP:
                size = FILE_CAP
                self._say_capped(relative)
            if relative not in self.files:
                if len(self.files) >= FILES_MAX or len(json.dumps([*self.files, relative])) > FILES_LIMIT:
                    continue  # its name does not fit the list: it stays in ./outputs only
                self.files.append(relative)
            sizes[relative] = size
        return sizes

    def _say_capped(self, relative):
        if relative not in self.capped:
            self.capped.add(relative)
            print(
                f"trialfleet: {relative} is over {FILE_CAP} bytes: the manager gets its first {FILE_CAP}; "
                f"all of it stays in {TRIAL_DIR}/{relative} with the job's outputs",
                flush=True,
            )

    def pending(self, sizes):
        """The next window: (file index, offset, length) of what is not acknowledged, in shipping order."""
        window: list[tuple[int, int, int]] = []
        whole = True  # the window holds all that is not acknowledged of the files so far
        for relative, size in sizes.items():
            index = self.files.index(relative)
            offset = self.acked[index] if index < len(self.acked) else 0
            if offset < 0:
                continue  # the manager refuses the name
            if relative == WHOLE[2] and not whole:
                break  # result.json only with (or after) the rest of everything before it
            while offset < size and len(window) < self.slots:
                window.append((index, offset, min(PIECE, size - offset)))
                offset += PIECE
            whole = whole and offset >= size
        return window

    def step(self):
        """Read the manager's acknowledgement, post the next window if it changed; True when all is acked."""
        sizes = self.scan()
        window = self.pending(sizes)
        if window and window == self.window:
            self._read_ack()
            window = self.pending(sizes)
        if not window:
            return True
        if window != self.window and time.time() - self.refused > 10.0:
            self._post_window(window)
        return False

    def _post_window(self, window):
        tags = [{"key": "trialfleet.files", "value": json.dumps(self.files)}]
        for slot in range(self.slots):
            value = "-"
            if slot < len(window):
                index, offset, length = window[slot]
                with open(os.path.join(self.trial_dir, self.files[index]), "rb") as f:
                    f.seek(offset)
                    data = f.read(length)
                value = f"{index}:{offset}:{base64.b64encode(data).decode('ascii')}"
            tags.append({"key": f"trialfleet.slot.{slot}", "value": value})
        metric = {
            "key": "trialfleet.shipped",
            "value": sum(n for n in self.acked if n > 0),
            "step": self.batches,
            "timestamp": int(time.time() * 1000),
        }
        self.batches += 1
        if self._request("log-batch", {"run_id": self.run_id, "tags": tags, "metrics": [metric]}):
            self.window = window
        else:
            self.refused = time.time()

    def _read_ack(self):
        run = self._request("get?" + urllib.parse.urlencode({"run_id": self.run_id}), None)
        if not run:
            return
        for tag in run.get("run", {}).get("data", {}).get("tags") or []:
            if tag.get("key") == "trialfleet.ack":
                try:
                    acked = json.loads(tag.get("value") or "[]")
                except ValueError:
                    return
                if isinstance(acked, list) and all(isinstance(n, int) for n in acked):
                    self.acked = acked
                    self.window = None  # refill from what the manager holds

    def _request(self, path, body):
        return mlflow_request(self.api, self.token, path, body)


def mlflow_request(api, token, path, body, attempts=8):
    """One MLflow request, retried while MLflow is unreachable, throttles or fails (5xx); its answer, or None
    when it refused or never answered (said on stderr: it is the job's log)."""
    data = json.dumps(body).encode() if body is not None else None
    delay = 0.5
    for attempt in range(attempts):
        request = urllib.request.Request(api + path, data=data, method="POST" if data else "GET")
        request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", "Bearer " + token)
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"{}") or {"ok": True}
        except urllib.error.HTTPError as error:
            if error.code < 500 and error.code != 429:
                sys.stderr.write(f"trialfleet: MLflow refused {path.split('?')[0]}: {error.read()[:500]!r}\n")
                return None
        except (OSError, ValueError) as error:
            sys.stderr.write(f"trialfleet: MLflow is unreachable (retried): {error}\n")
        if attempt + 1 < attempts:
            time.sleep(delay)
            delay = min(delay * 2, 10.0)
    return None


def _shipping_order(relative):
    """The metric stream, the keeper's record, the rest, result.json."""
    if relative in WHOLE[:2]:
        return WHOLE.index(relative)
    return 3 if relative == WHOLE[2] else 2


def shim_needed():
    """The ``nni`` shim, unless this python has a real nni (one without the shim's marker file)."""
    try:
        import importlib.util

        spec = importlib.util.find_spec("nni")
    except (ImportError, ValueError):
        return True
    origin = spec.origin if spec is not None else None
    return not (origin and not os.path.exists(os.path.join(os.path.dirname(origin), "_trialfleet.py")))


def prepare(support, trial_dir):
    """The trial directory and the keeper's environment, from the job's variables."""
    os.makedirs(os.path.join(trial_dir, ".nni"), exist_ok=True)
    with open(os.path.join(trial_dir, "parameter.cfg"), "w") as f:
        f.write(os.environ.pop(ENV_PREFIX + "PARAMETERS"))
    command = os.environ.pop(ENV_PREFIX + "COMMAND")
    record = {
        "argv": ["/bin/bash", "-c", command],
        "cwd": os.getcwd(),
        "env": None,
        "max_duration": None,
        "kill_grace": 5.0,
        "protocol": 2,  # keeper.py's PROTOCOL (tested)
    }
    with open(os.path.join(trial_dir, "command.json"), "w") as f:
        json.dump(record, f)
    env = keeper_environment(support)
    env.update(NNI_SYS_DIR=trial_dir, NNI_OUTPUT_DIR=trial_dir, NNI_CODE_DIR=os.getcwd())
    return env


def keeper_environment(support):
    """The job's environment for the keeper: no NNI channel variables, the ``nni`` shim unless a real nni."""
    env = dict(os.environ)
    for name in ("NNI_TRIAL_COMMAND_CHANNEL", "REUSE_MODE", "MULTI_PHASE", "SDK_PROCESS"):
        env.pop(name, None)
    if shim_needed():
        shim = os.path.join(support, "nni-shim")
        env["PYTHONPATH"] = shim + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def exit_code(trial_dir, status):
    try:
        with open(os.path.join(trial_dir, "result.json")) as f:
            result = json.load(f)
    except (OSError, ValueError):
        return 128 - status if status < 0 else (status or 1)
    code = result.get("exit_code")
    if isinstance(code, int):
        return code
    return 128 + result["signal"] if isinstance(result.get("signal"), int) else 1


def drain(step, cancelled, what):
    """Call ``step`` until it says everything is acknowledged, for at most ``DRAIN`` seconds (``CANCEL_DRAIN``
    after a SIGTERM)."""
    limit = CANCEL_DRAIN if cancelled else DRAIN
    deadline = time.time() + limit
    while not step():
        if time.time() > deadline:
            print(f"trialfleet: the manager did not take {what} within {limit:.0f} s", flush=True)
            return
        time.sleep(0.5)


def main(argv):
    support = os.path.abspath(argv[1])
    trial_dir = os.path.join(os.getcwd(), TRIAL_DIR)
    env = prepare(support, trial_dir)
    shipper = Shipper(trial_dir)
    terminated = []
    signal.signal(
        signal.SIGTERM, lambda *_: terminated.append(1)
    )  # the keeper gets it too and ends the trial
    print(
        f"trialfleet: running the trial in {trial_dir} (its output: trial.stdout, trial.stderr)", flush=True
    )
    keeper = subprocess.Popen(
        [sys.executable, "-I", "-S", os.path.join(support, "keeper", "keeper.py"), trial_dir], env=env
    )
    while keeper.poll() is None:
        shipper.step()
        time.sleep(0.5)
    code = exit_code(trial_dir, keeper.returncode)
    print(f"trialfleet: the trial ended (exit code {code})", flush=True)
    drain(shipper.step, bool(terminated), "the trial's files")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
