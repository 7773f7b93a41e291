"""Where the shim lives, what it may import, and when a trial or the manager gets it on its path."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from trial_helpers import trial_env

from trialfleet.compat import (
    REAL_NNI_PROBE,
    SHIM_PATH,
    ensure_nni_importable,
    real_nni_installed,
    trial_pythonpath_env,
)

# Imported lazily, inside the method that needs it, exactly as NNI's ClassArgsValidator does.
_ALLOWED_NON_STDLIB = {"schema"}


def _real_nni_distribution() -> bool:
    try:
        importlib.metadata.distribution("nni")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


@pytest.fixture
def fake_real_nni(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory holding a foreign ``nni`` package (stands for NNI's distribution).

    Earlier tests in this process may have imported the shim (custom tuners do ``import nni``); detection
    rightly trusts an already imported ``nni``, so it is hidden from ``sys.modules`` for these tests."""
    for name in [m for m in sys.modules if m == "nni" or m.startswith("nni.")]:
        monkeypatch.delitem(sys.modules, name)
    root = tmp_path / "site"
    (root / "nni").mkdir(parents=True)
    (root / "nni" / "__init__.py").write_text("REAL = True\n")
    return root


def test_shim_directory_exposes_only_the_nni_package() -> None:
    entries = {p.name for p in SHIM_PATH.iterdir() if p.name != "__pycache__"}
    assert entries == {"__init__.py", "nni"}
    assert (SHIM_PATH / "nni" / "__init__.py").is_file()


def test_shim_imports_only_the_standard_library_and_itself() -> None:
    for source in sorted((SHIM_PATH / "nni").glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            if isinstance(node, ast.ImportFrom) and node.level > 0:
                continue
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            for name in names:
                top = name.split(".")[0]
                assert top in sys.stdlib_module_names or top in _ALLOWED_NON_STDLIB, f"{source.name}: {name}"


def test_import_nni_is_fast_and_never_loads_trialfleet() -> None:
    source = (
        "import json, sys, time\n"
        "start = time.perf_counter()\n"
        "import nni\n"
        "elapsed = time.perf_counter() - start\n"
        "import nni.utils, nni.trial\n"
        "loaded = sorted(m for m in sys.modules if m == 'trialfleet' or m.startswith('trialfleet.'))\n"
        "print(json.dumps({'ms': elapsed * 1000, 'trialfleet': loaded, 'file': nni.__file__}))"
    )
    env = trial_env(None, platform=None)
    proc = subprocess.run([sys.executable, "-c", source], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    print(f"import nni (shim): {out['ms']:.1f} ms")
    assert out["trialfleet"] == []
    assert out["file"] == str(SHIM_PATH / "nni" / "__init__.py")

    timing = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import nni"], env=env, capture_output=True, text=True
    )
    assert timing.returncode == 0, timing.stderr
    print("python -X importtime:", timing.stderr.strip().splitlines()[-1])


@pytest.mark.skipif(_real_nni_distribution(), reason="a real nni is installed in this environment")
def test_no_real_nni_here() -> None:
    assert real_nni_installed() is False
    assert real_nni_installed(sys.executable) is False


def test_in_process_detection_finds_a_real_nni_behind_the_shim(
    fake_real_nni: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(fake_real_nni))
    monkeypatch.syspath_prepend(str(SHIM_PATH))
    assert real_nni_installed() is True


def test_other_interpreter_is_probed_in_a_subprocess(
    fake_real_nni: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(SHIM_PATH), str(fake_real_nni)]))
    assert real_nni_installed(sys.executable) is True
    monkeypatch.setenv("PYTHONPATH", str(SHIM_PATH))
    if not _real_nni_distribution():
        assert real_nni_installed(sys.executable) is False


def test_probe_snippet_tells_the_shim_from_a_real_nni(fake_real_nni: Path) -> None:
    def probe(pythonpath: str) -> str:
        env = trial_env(None, platform=None, pythonpath=pythonpath)
        return subprocess.run(
            [sys.executable, "-c", REAL_NNI_PROBE], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()

    assert probe(str(fake_real_nni)) == "yes"
    assert probe(str(SHIM_PATH)) == "no"


def test_unknown_interpreter_means_no_real_nni() -> None:
    assert real_nni_installed("/nonexistent/python3") is False


def test_trial_pythonpath_env() -> None:
    shim = str(SHIM_PATH)
    assert trial_pythonpath_env({}, real_nni=True) == {}
    assert trial_pythonpath_env({}, real_nni=False) == {"PYTHONPATH": shim}
    joined = os.pathsep.join(["/opt/lib", "", shim, "/srv/x"])
    assert trial_pythonpath_env({"PYTHONPATH": joined}, real_nni=False) == {
        "PYTHONPATH": os.pathsep.join([shim, "/opt/lib", "/srv/x"])
    }
    remote = trial_pythonpath_env({"PYTHONPATH": "/a"}, real_nni=False, shim_dir="/tmp/tf shim")
    assert remote == {"PYTHONPATH": os.pathsep.join(["/tmp/tf shim", "/a"])}
    if not _real_nni_distribution():
        assert trial_pythonpath_env({}, python=sys.executable) == {"PYTHONPATH": shim}


def test_ensure_nni_importable_adds_the_shim_once() -> None:
    source = (
        "import json, sys\n"
        "from trialfleet.compat import ensure_nni_importable\n"
        "first, second = ensure_nni_importable(), ensure_nni_importable()\n"
        "import nni\n"
        "print(json.dumps([first, second, nni.__file__, sys.path.count(str(nni.__file__).rsplit('/', 2)[0])]))"
    )
    env = trial_env(None, platform=None, pythonpath=None)
    proc = subprocess.run([sys.executable, "-c", source], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == [True, True, str(SHIM_PATH / "nni" / "__init__.py"), 1]


def test_ensure_nni_importable_leaves_a_real_nni_alone(fake_real_nni: Path) -> None:
    source = (
        "from trialfleet.compat import ensure_nni_importable\n"
        "print(ensure_nni_importable())\n"
        "import nni\n"
        "print(nni.REAL)"
    )
    env = trial_env(None, platform=None, pythonpath=str(fake_real_nni))
    proc = subprocess.run([sys.executable, "-c", source], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]


def test_ensure_nni_importable_in_this_process_is_reversible(monkeypatch: pytest.MonkeyPatch) -> None:
    # earlier tests in this process may have put the shim on sys.path already
    monkeypatch.setattr(sys, "path", [entry for entry in sys.path if entry != str(SHIM_PATH)])
    if _real_nni_distribution():
        assert ensure_nni_importable() is False
    else:
        assert ensure_nni_importable() is True
        assert sys.path[0] == str(SHIM_PATH)
