"""The project is described in pyproject.toml; this only adds the web UI's npm build step to every build
(``pip install .``, a wheel, an editable install): see scripts/build_webui.py."""

from __future__ import annotations

import runpy
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildWithWebUI(build_py):
    def run(self) -> None:
        script = Path(__file__).resolve().parent / "scripts" / "build_webui.py"
        if script.is_file():  # absent from an sdist, whose package already holds the built bundles
            runpy.run_path(str(script))["build"]()
        super().run()


setup(cmdclass={"build_py": BuildWithWebUI})
