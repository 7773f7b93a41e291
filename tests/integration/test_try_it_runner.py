"""The try-it runner (try_it.py) on pages of the test's own: what it reads from a page, and each way a page's
commands fail it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.try_it import run_as_written, shows, try_it_steps, user_env

PAGE = """# A page

## Try it

```console
$ python3 -c 'print("server at http://127.0.0.1:9/ ready", flush=True); import time; time.sleep(600)' &
server at <url> ready
$ export GREETING=hello
```

Text between blocks.

```console
$ test "$GREETING" = hello
$ kill %1
```

## Next

```console
$ false
```
"""


def run_page(tmp_path: Path, text: str) -> list[str]:
    page = tmp_path / "page.md"
    page.write_text(text)
    steps = try_it_steps(page, "## Try it")
    env = user_env(tmp_path)
    return run_as_written(
        steps, tmp_path, env, tmp_path / "terminal.log", private_network=False, stop_grace=2
    )


def test_the_section_s_commands_and_what_each_shows_are_read(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    steps = try_it_steps(page, "## Try it")
    page_steps = [(step.command.split()[0], step.shown, step.background) for step in steps]
    assert page_steps == [
        ("python3", ("server at <url> ready",), True),
        ("export", (), False),
        ("test", (), False),
        ("kill", (), False),
    ]
    assert shows("token: eyJhbGciOi…", "  token: eyJhbGciOiJIUzI1NiJ9.x.y")
    assert not shows("listening on http://127.0.0.1:8090/", "listening on http://127.0.0.1:8080/")


def test_a_page_that_runs_as_written_passes(tmp_path: Path) -> None:
    printed = run_page(tmp_path, PAGE)
    assert "server at http://127.0.0.1:9/ ready" in printed[0]


@pytest.mark.parametrize(
    ("broken", "says"),
    [
        (PAGE.replace("$ kill %1\n", ""), "left these running"),
        (PAGE.replace("GREETING=hello", "GREETING=bye"), "exited 1"),
        (
            PAGE.replace("time.sleep(600)", "exit(3)").replace(" ready\n", " up\n"),
            "ended before it was ready",
        ),
    ],
    ids=["a server the page does not stop", "a command that fails", "a server that ends before it is ready"],
)
def test_a_page_whose_commands_do_not_work_fails(tmp_path: Path, broken: str, says: str) -> None:
    with pytest.raises(AssertionError, match=says):
        run_page(tmp_path, broken)
