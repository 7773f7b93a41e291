"""Build the web UI's third-party JavaScript: plotly.js's cartesian bundle from its npm package.

    python scripts/build_webui.py      (setup.py runs it on every build: ``pip install .``, a wheel, ``-e``)

``npm ci`` installs what ``webui/package-lock.json`` pins into ``webui/node_modules``; the bundle is copied to
``trialfleet/webui/static/vendor/`` (never committed) with a gzipped copy beside it, which the server sends to
browsers that accept gzip. The cartesian bundle (1.5 MB, 0.5 MB gzipped) draws a trial's curves (scatter: its
drawer, the comparison; the Overview's and the Charts page's charts are the page's own, without plotly.js); the
whole plotly.js in the ``plotly`` wheel is 4.8 MB and took 2-3x as long to evaluate in headless Chromium.
Without npm nothing is built and the server falls back to that whole bundle (same pages, a slower first trial
curve); the build says so and does not fail.

Standard library only: setup.py runs it before any dependency is installed.
"""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NPM_PROJECT = ROOT / "webui"
VENDOR = ROOT / "trialfleet" / "webui" / "static" / "vendor"
#: npm package → (its file, the name it is served under)
BUNDLES = {"plotly.js-cartesian-dist-min": ("plotly-cartesian.min.js", "plotly-cartesian.min.js")}


def locked_version(package: str) -> str:
    lock = json.loads((NPM_PROJECT / "package-lock.json").read_text())
    return str(lock["packages"][f"node_modules/{package}"]["version"])


def installed_version(package: str) -> str | None:
    manifest = NPM_PROJECT / "node_modules" / package / "package.json"
    return json.loads(manifest.read_text())["version"] if manifest.is_file() else None


def npm_ci() -> bool:
    """Install the locked packages unless they already are; False when npm is missing or fails."""
    if all(installed_version(p) == locked_version(p) for p in BUNDLES):
        return True
    npm = shutil.which("npm")
    if npm is None:
        return False
    done = subprocess.run(
        [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=NPM_PROJECT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        print(f"build_webui: npm ci failed:\n{done.stderr}", file=sys.stderr)
        return False
    return True


def write_if_changed(path: Path, data: bytes) -> None:
    if not path.is_file() or path.read_bytes() != data:
        path.write_bytes(data)


def build() -> bool:
    """Copy each bundle and its gzipped copy into the package; False (nothing written) without npm."""
    if not (NPM_PROJECT / "package-lock.json").is_file():
        return VENDOR.is_dir()  # an sdist built before: the bundles are already in the package
    if not npm_ci():
        print(
            "build_webui: npm is not available: the web UI will serve the whole plotly.js from the plotly "
            "package (its first chart is slower); install Node.js and npm, then reinstall, for the partial bundle",
            file=sys.stderr,
        )
        return False
    VENDOR.mkdir(parents=True, exist_ok=True)
    for package, (source, served) in BUNDLES.items():
        data = (NPM_PROJECT / "node_modules" / package / source).read_bytes()
        write_if_changed(VENDOR / served, data)
        write_if_changed(VENDOR / f"{served}.gz", gzip.compress(data, compresslevel=9, mtime=0))
        license_text = (NPM_PROJECT / "node_modules" / package / "LICENSE").read_bytes()
        write_if_changed(VENDOR / f"{served}.LICENSE.txt", license_text)
    return True


if __name__ == "__main__":
    sys.exit(0 if build() else 1)
