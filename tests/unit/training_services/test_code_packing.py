"""Code directory packing: .nniignore (gitignore rules, nested files), NNI's limits, hostile file names."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from trialfleet.errors import CodeDirectoryError
from trialfleet.storage import ExperimentStore
from trialfleet.training_services.code_packing import (
    MAX_BYTES,
    check_code_dir,
    list_code_files,
    pack_code_dir,
)

HOSTILE_NAMES = [
    "with space.py",
    "it's.txt",
    'double "quoted".txt',
    "semi;colon.sh",
    "$(touch pwned).txt",
    "`touch pwned`.txt",
    "new\nline.txt",
    "ünïcødé ✓.txt",
    "-leading-dash",
    "*",
]


def make_tree(root: Path, files: dict[str, str]) -> None:
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")


def extract_checked(tar: tarfile.TarFile, into: Path) -> None:
    """Unpack with the "data" filter where Python has it (3.10.12+, 3.11.4+); on older ones (Debian 12's
    3.11.2) check first that every member is a plain file or folder inside ``into``, as that filter would."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(into, filter="data")
        return
    for member in tar.getmembers():
        assert member.isfile() or member.isdir(), member.name
        assert not Path(member.name).is_absolute() and ".." not in Path(member.name).parts, member.name
    tar.extractall(into)


def names(code_dir: Path) -> list[str]:
    return [path.as_posix() for path in list_code_files(code_dir)]


def test_hostile_names_are_listed_and_packed_exactly(tmp_path: Path) -> None:
    code = tmp_path / "code 'dir' ü"
    make_tree(code, {name: f"content of {name}" for name in HOSTILE_NAMES})
    make_tree(code, {f"sub dir;$(x)/{name}": name for name in HOSTILE_NAMES[:3]})
    expected = sorted([*HOSTILE_NAMES, *(f"sub dir;$(x)/{name}" for name in HOSTILE_NAMES[:3])])
    assert names(code) == sorted(Path(name).as_posix() for name in expected)
    tarball = pack_code_dir(code, tmp_path / "out" / "code.tar.gz")
    unpacked = tmp_path / "unpacked"
    with tarfile.open(tarball) as tar:
        extract_checked(tar, unpacked)
    assert names(unpacked) == names(code)
    for name in expected:
        assert (unpacked / name).read_text(encoding="utf-8") == (code / name).read_text(encoding="utf-8")
    assert not list(tmp_path.rglob("pwned"))
    assert not list((tmp_path / "out").glob("*.tmp"))


def test_nniignore_follows_gitignore_rules_and_nests(tmp_path: Path) -> None:
    make_tree(
        tmp_path,
        {
            ".nniignore": "*.log\ndata/\n/top-only.txt\n# comment\n!important.log\n",
            "main.py": "",
            "run.log": "",
            "important.log": "",
            "top-only.txt": "",
            "data/big.bin": "",
            "pkg/data/also-ignored.bin": "",
            "pkg/top-only.txt": "",
            "pkg/debug.log": "",
            "pkg/.nniignore": "!keep.log\n*.tmp\n",
            "pkg/keep.log": "",
            "pkg/scratch.tmp": "",
            "pkg/deeper/more.tmp": "",
            "pkg/deeper/code.py": "",
        },
    )
    assert names(tmp_path) == [
        ".nniignore",
        "important.log",
        "main.py",
        "pkg/.nniignore",
        "pkg/deeper/code.py",
        "pkg/keep.log",
        "pkg/top-only.txt",
    ]


def test_symlinks_are_listed_not_followed(tmp_path: Path) -> None:
    make_tree(tmp_path, {"real/file.py": "", "target.txt": ""})
    (tmp_path / "link-dir").symlink_to(tmp_path / "real")
    (tmp_path / "link-file").symlink_to(tmp_path / "target.txt")
    assert names(tmp_path) == ["link-dir", "link-file", "real/file.py", "target.txt"]


def test_an_experiment_directory_inside_the_code_is_not_shipped(tmp_path: Path) -> None:
    """``experimentWorkingDirectory: ./experiments``: the manager's own database and logs stay home."""
    store = ExperimentStore.for_experiment_dir(tmp_path / "experiments" / "abc123")
    store.close()
    make_tree(
        tmp_path,
        {
            "trial.py": "",
            "experiments/abc123/log/manager.log": "",
            "experiments/notes.txt": "",
            "db/data.csv": "",
        },
    )
    assert names(tmp_path) == ["db/data.csv", "experiments/notes.txt", "trial.py"]


@pytest.mark.slow
def test_too_many_files_names_the_fullest_directories(tmp_path: Path) -> None:
    for index in range(2001):
        make_tree(tmp_path, {f"many/batch{index % 3}/f{index}.py": "x"})
    make_tree(tmp_path, {"main.py": ""})
    with pytest.raises(CodeDirectoryError) as error:
        check_code_dir(tmp_path)
    message = str(error.value)
    assert "2002 files (limit 2000)" in message and ".nniignore" in message
    assert "2001 files" in message and "many/" in message and "many/batch0/" in message


@pytest.mark.slow
def test_ignored_files_do_not_count(tmp_path: Path) -> None:
    for index in range(2001):
        make_tree(tmp_path, {f"many/f{index}.py": "x"})
    make_tree(tmp_path, {".nniignore": "many/\n", "main.py": ""})
    assert [p.as_posix() for p in check_code_dir(tmp_path)] == [".nniignore", "main.py"]


def test_too_big_names_the_largest_files(tmp_path: Path) -> None:
    make_tree(tmp_path, {"main.py": "print(1)", "data/small.bin": "x"})
    with (tmp_path / "data" / "huge.bin").open("wb") as f:
        f.truncate(MAX_BYTES + 1)  # sparse: the size counts, the disk is not used
    with pytest.raises(CodeDirectoryError) as error:
        pack_code_dir(tmp_path, tmp_path.parent / "never.tar.gz")
    message = str(error.value)
    assert "(limit 300.0 MB)" in message
    largest = message.split("largest files:")[1].splitlines()[1]
    assert largest.endswith("data/huge.bin") and "300.0 MB" in largest
    assert not (tmp_path.parent / "never.tar.gz").exists()


def test_missing_code_dir(tmp_path: Path) -> None:
    with pytest.raises(CodeDirectoryError, match="cannot read the trial code directory"):
        list_code_files(tmp_path / "missing")


@pytest.mark.parametrize(
    ("platform", "storage_key"),
    [
        ("slurm", "shared_directory"),
        ("dlts", "local_storage_mount_point"),
        ("dlts", "experiment_working_directory"),
    ],
)
@pytest.mark.slow
def test_a_code_directory_is_checked_before_create_unless_it_is_used_in_place(
    tmp_path: Path, platform: str, storage_key: str
) -> None:
    """NNI's limits apply to a code directory the platform copies; one already on the storage is not copied."""
    from trialfleet.config import ExperimentConfig
    from trialfleet.startup import preflight

    storage, elsewhere = tmp_path / "storage", tmp_path / "elsewhere"
    for code_dir in (storage / "code", elsewhere / "code"):
        make_tree(code_dir, {f"f{index:04d}.txt": "x" for index in range(2001)})
    extra = {"dashboard": "http://127.0.0.1:9/"} if platform == "dlts" else {}

    def config(code_dir: Path) -> ExperimentConfig:
        return ExperimentConfig.for_platform(
            platform,
            trial_command="python3 trial.py",
            trial_concurrency=1,
            trial_code_directory=str(code_dir),
            search_space={"x": {"_type": "choice", "_value": [1]}},
            tuner={"name": "Random"},
            **{
                "experiment_working_directory": str(tmp_path / "experiments"),
                storage_key: str(storage),
                **extra,
            },
        )

    preflight(config(storage / "code"))  # used in place
    with pytest.raises(CodeDirectoryError, match=r"2001 files \(limit 2000\)"):
        preflight(config(elsewhere / "code"))


@pytest.mark.slow
def test_the_local_platform_ships_nothing_so_preflight_leaves_its_service_unloaded(tmp_path: Path) -> None:
    """``create`` does not import the local service to learn that it ships nothing (~40 ms of its start)."""
    from trialfleet.config import ExperimentConfig
    from trialfleet.training_services.local.service import LocalTrainingService

    code_dir = tmp_path / "code"
    make_tree(code_dir, {f"f{index:04d}.txt": "x" for index in range(2001)})  # over NNI's limit: never packed
    fields = {
        "trial_command": "python3 trial.py",
        "trial_concurrency": 1,
        "trial_code_directory": str(code_dir),
        "search_space": {"x": {"_type": "choice", "_value": [1]}},
        "tuner": {"name": "Random"},
    }
    config = ExperimentConfig.for_platform("local", **fields)
    assert LocalTrainingService.shipped_code_directories(config.training_services[0], tmp_path) == []
    script = (
        "import sys\n"
        "from trialfleet.config import ExperimentConfig\n"
        "from trialfleet.startup import preflight\n"
        f"preflight(ExperimentConfig.for_platform('local', **{fields!r}))\n"
        "print('trialfleet.training_services.local.service' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


@pytest.mark.slow
def test_gitignore_rules_are_imported_only_for_a_code_directory_that_has_an_nniignore(tmp_path: Path) -> None:
    """pathspec (~18 ms to import) is not on the way to a remote experiment's first trial unless it is needed."""
    plain, ignoring = tmp_path / "plain", tmp_path / "ignoring"
    make_tree(plain, {"trial.py": "x", "sub/data.txt": "y"})
    make_tree(ignoring, {"trial.py": "x", "sub/.nniignore": "*.txt\n", "sub/data.txt": "y"})
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "import trialfleet.manager.process\n"
        "from trialfleet.training_services.code_packing import list_code_files\n"
        "print(list_code_files(Path(sys.argv[1])), 'pathspec' in sys.modules)\n"
    )
    for code_dir, shown in (
        (plain, "[PosixPath('sub/data.txt'), PosixPath('trial.py')] False"),
        (ignoring, "[PosixPath('sub/.nniignore'), PosixPath('trial.py')] True"),
    ):
        result = subprocess.run(
            [sys.executable, "-c", script, str(code_dir)], capture_output=True, text=True, check=True
        )
        assert result.stdout.strip() == shown
