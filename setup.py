"""Packaging hook: every wheel and sdist carries the viewer's bundle, built here from the npm lockfile.

The metadata lives in pyproject.toml; this file only adds the build step that
`make setup` does for a checkout: `npm ci` (exactly the lockfile) and
`npm run build` in graphviz_app/viewer, when graphviz_app/viewer/dist is
missing or older than its sources. Without npm the build stops and says what
to install, so no wheel ships without the viewer. An editable install
(`pip install -e .`, what `make setup` runs) builds nothing: the Makefile
builds the bundle in place.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist
from setuptools.errors import ExecError

VIEWER = Path(__file__).resolve().parent / "graphviz_app" / "viewer"
BUNDLE = ("dist/viewer.js", "dist/viewer.css")
DIST_PACKAGE = "graphviz_app.viewer.dist"
SOURCES = ("package.json", "package-lock.json", "build.mjs", "src")
NO_NPM = (
    "graphviz-app's wheel carries the viewer's JavaScript bundle ({bundle}), which is {state}, "
    "and building it needs npm, which is not on PATH. Install Node.js 18 or later with npm "
    "(Debian/Ubuntu: apt-get install nodejs npm; macOS: brew install node; or https://nodejs.org), "
    "then build again."
)


def _newest_source() -> float:
    """The latest modification time among the bundle's sources (0 when there are none)."""
    times = [0.0]
    for name in SOURCES:
        path = VIEWER / name
        if path.is_dir():
            times += [p.stat().st_mtime for p in path.rglob("*") if p.is_file()]
        elif path.exists():
            times.append(path.stat().st_mtime)
    return max(times)


def _bundle_state() -> str | None:
    """None when the bundle is there and newer than its sources, else what is wrong with it."""
    paths = [VIEWER / name for name in BUNDLE]
    if not all(p.is_file() and p.stat().st_size > 0 for p in paths):
        return "missing"
    if min(p.stat().st_mtime for p in paths) < _newest_source():
        return "older than its sources"
    return None


def _npm(*args: str) -> None:
    npm = shutil.which("npm")
    state = _bundle_state() or "out of date"
    if npm is None:
        raise ExecError(NO_NPM.format(bundle="graphviz_app/viewer/dist/viewer.js", state=state))
    done = subprocess.run([npm, *args], cwd=VIEWER, check=False)
    if done.returncode != 0:
        raise ExecError(
            f"`npm {' '.join(args)}` in graphviz_app/viewer failed with exit status {done.returncode} "
            "(its output is above): the viewer's bundle could not be built, so no wheel is made."
        )


def ensure_bundle() -> None:
    """Build graphviz_app/viewer/dist from the lockfile unless it is already newer than its sources."""
    state = _bundle_state()
    if state is None:
        return
    if not (VIEWER / "package-lock.json").is_file():
        raise ExecError(
            f"the viewer's bundle graphviz_app/viewer/dist is {state} and its sources (package-lock.json, "
            "src/) are not here either: build from a git checkout or from graphviz-app's sdist."
        )
    installed = VIEWER / "node_modules" / ".package-lock.json"
    if not installed.is_file() or installed.stat().st_mtime < (VIEWER / "package-lock.json").stat().st_mtime:
        # --prefer-offline: a warm npm cache (after `make setup`) serves the lockfile without the network.
        _npm("ci", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
    _npm("run", "--silent", "build")
    state = _bundle_state()
    if state is not None:
        raise ExecError(f"`npm run build` finished but graphviz_app/viewer/dist/viewer.js is {state}")


class BuildPyWithViewer(build_py):
    """build_py that first builds the viewer's bundle, so package data finds it."""

    def run(self) -> None:
        if not self.editable_mode:
            ensure_bundle()
            # Found before the bundle existed: dist/ is a package of data now, and the data is listed again.
            if self.packages is not None and DIST_PACKAGE not in self.packages:
                self.packages.append(DIST_PACKAGE)
            self.__dict__.pop("data_files", None)
        super().run()


class SdistWithViewer(sdist):
    """sdist that carries the built bundle beside its sources: a wheel from it needs no npm."""

    def run(self) -> None:
        ensure_bundle()
        super().run()


setup(cmdclass={"build_py": BuildPyWithViewer, "sdist": SdistWithViewer})
