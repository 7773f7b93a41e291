#!/usr/bin/env python3
"""trialfleet's entry command in an Azure ML job: run the trial keeper, ship the trial directory to MLflow.

Usage: ``python3 -I -S forwarder.py <support dir>`` in the job's working directory (the code snapshot).

Standalone on purpose (stdlib only, Python >= 3.8): it runs in the job's image, where nothing of trialfleet is
installed. The manager cannot read the job's disk and the job may not reach the manager, but every AML job can
reach its workspace's MLflow tracking server (``MLFLOW_TRACKING_URI``, ``MLFLOW_RUN_ID`` = the job's name,
``MLFLOW_TRACKING_TOKEN``), so that is the channel:

* it writes the trial directory (``parameter.cfg``, ``command.json``) from the job's environment and runs the
  keeper on it, with NNI's variables and the ``nni`` shim (unless the image has a real ``nni``);
* every half second, and once more after the keeper ended, it ships what each file of the trial directory
  gained (``.nni/metrics``, ``trial.stdout``, ``keeper.json``, ``result.json`` …) as MLflow tags of the run:
  ``trialfleet.files`` lists the files, ``trialfleet.<file>.<chunk>`` holds ``<offset>:<base64 bytes>``, and
  the metric ``trialfleet.shipped`` counts the bytes shipped (its step is the batch's number). Shipping a batch
  again after a failed request sets the same tags again: the manager applies each chunk once, by its offset;
* SIGTERM (AML cancelling the job) reaches the keeper, which ends the trial's tree; this process goes on
  until everything is shipped, then exits with the trial's exit code, so AML's status agrees with the trial.
"""

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

CHUNK = 3000  # bytes per tag: 4000 base64 characters, under MLflow's limit of tag values
TAGS_PER_REQUEST = 50
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


class Shipper:
    def __init__(self, trial_dir):
        uri = os.environ["MLFLOW_TRACKING_URI"]
        if uri.startswith("azureml://"):  # what the azureml-mlflow plugin does
            uri = "https://" + uri[len("azureml://") :]
        self.url = uri.rstrip("/") + "/api/2.0/mlflow/runs/log-batch"
        self.run_id = os.environ["MLFLOW_RUN_ID"]
        self.token = os.environ.get("MLFLOW_TRACKING_TOKEN") or os.environ.get("AZUREML_RUN_TOKEN", "")
        self.trial_dir = trial_dir
        self.files = []  # relative paths, in the order first seen: a file's index names its tags
        self.shipped = {}  # relative path -> (bytes shipped, chunks shipped)
        self.total = 0
        self.batches = 0

    def scan(self):
        """Tags for every byte the trial directory gained since the last scan."""
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
        # result.json last: a manager that sees the trial's end has every byte written before it
        found.sort(key=lambda relative: relative == "result.json")
        tags = []
        for relative in found:
            tags += self._file_tags(relative, os.path.join(self.trial_dir, relative))
        return tags

    def _file_tags(self, relative, path):
        offset, chunks = self.shipped.get(relative, (0, 0))
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
        if not data:
            return []
        if relative not in self.files:
            self.files.append(relative)
        index = self.files.index(relative)
        tags = []
        for start in range(0, len(data), CHUNK):
            piece = data[start : start + CHUNK]
            value = f"{offset + start}:{base64.b64encode(piece).decode('ascii')}"
            tags.append({"key": f"trialfleet.{index}.{chunks}", "value": value})
            chunks += 1
        self.shipped[relative] = (offset + len(data), chunks)
        self.total += len(data)
        return tags

    def ship(self, tags):
        """Send the tags, the file list first, retrying until MLflow took them."""
        if not tags:
            return
        files = {"key": "trialfleet.files", "value": json.dumps(self.files)}
        batches = [tags[i : i + TAGS_PER_REQUEST] for i in range(0, len(tags), TAGS_PER_REQUEST)]
        for number, batch in enumerate(batches):
            metric = {
                "key": "trialfleet.shipped",
                "value": self.total,
                "step": self.batches,
                "timestamp": int(time.time() * 1000),
            }
            self.batches += 1
            body = {"run_id": self.run_id, "tags": ([files] if number == 0 else []) + batch}
            if number == len(batches) - 1:
                body["metrics"] = [metric]
            self._post(body)

    def _post(self, body):
        data = json.dumps(body).encode()
        delay = 0.5
        for _ in range(60):
            request = urllib.request.Request(self.url, data=data, method="POST")
            request.add_header("Content-Type", "application/json")
            if self.token:
                request.add_header("Authorization", "Bearer " + self.token)
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    response.read()
                return
            except urllib.error.HTTPError as error:
                if error.code < 500 and error.code != 429:
                    sys.stderr.write(
                        f"trialfleet: MLflow refused the trial's files: {error.read()[:500]!r}\n"
                    )
                    return
            except (OSError, ValueError) as error:
                sys.stderr.write(f"trialfleet: MLflow is unreachable (retried): {error}\n")
            time.sleep(delay)
            delay = min(delay * 2, 10.0)


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
    env = dict(os.environ)
    for name in ("NNI_TRIAL_COMMAND_CHANNEL", "REUSE_MODE", "MULTI_PHASE", "SDK_PROCESS"):
        env.pop(name, None)
    env.update(NNI_SYS_DIR=trial_dir, NNI_OUTPUT_DIR=trial_dir, NNI_CODE_DIR=os.getcwd())
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


def main(argv):
    support = os.path.abspath(argv[1])
    trial_dir = os.path.join(os.getcwd(), TRIAL_DIR)
    env = prepare(support, trial_dir)
    shipper = Shipper(trial_dir)
    signal.signal(signal.SIGTERM, lambda *_: None)  # the keeper gets it too and ends the trial; we ship
    print(
        f"trialfleet: running the trial in {trial_dir} (its output: trial.stdout, trial.stderr)", flush=True
    )
    keeper = subprocess.Popen(
        [sys.executable, "-I", "-S", os.path.join(support, "keeper", "keeper.py"), trial_dir], env=env
    )
    while keeper.poll() is None:
        shipper.ship(shipper.scan())
        time.sleep(0.5)
    shipper.ship(shipper.scan())
    code = exit_code(trial_dir, keeper.returncode)
    print(f"trialfleet: the trial ended (exit code {code})", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
