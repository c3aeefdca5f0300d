"""A wheel built from a fresh clone carries the viewer's bundle; without npm the build says what to install.

The build runs as a user's `pip wheel .` or `pip install git+...` does: from a
`git clone` of this checkout (committed files only, no node_modules, no dist/),
through the build backend (setup.py's build step), without build isolation so
nothing is downloaded; npm installs the lockfile from its cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ("graphviz_app/viewer/dist/viewer.js", "graphviz_app/viewer/dist/viewer.css")
TIMEOUT = 900  # bounds a hang (npm ci on a cold cache, a busy machine); it does not measure speed

pytestmark = pytest.mark.slow


def _run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)


def _pip_wheel(source: Path, out: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # --no-build-isolation: the backend (setuptools) comes from this environment, nothing is fetched.
    return _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out), "."],
                source, env)


def _without_npm() -> dict[str, str]:
    """The environment with only Python's own folder on PATH: no npm, no node."""
    folder = str(Path(sys.executable).parent)
    if shutil.which("npm", path=folder):
        pytest.skip(f"npm sits beside Python in {folder}: cannot hide it for this test")
    return {**os.environ, "PATH": folder}


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("needs git to clone the checkout (apt-get install git)")
    if not (ROOT / ".git").exists():
        pytest.skip(f"{ROOT} is not a git checkout: nothing to clone")
    target = tmp_path_factory.mktemp("clone") / "graphviz-app"
    done = _run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(target)], ROOT)
    assert done.returncode == 0, done.stderr
    assert not (target / "graphviz_app/viewer/dist").exists(), "a fresh clone has no bundle: dist/ is git-ignored"
    return target


def _names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_without_npm_the_wheel_build_fails_saying_what_to_install(clone: Path, tmp_path: Path) -> None:
    done = _pip_wheel(clone, tmp_path, _without_npm())

    assert done.returncode != 0 and not list(tmp_path.glob("*.whl"))
    said = done.stdout + done.stderr
    assert "graphviz_app/viewer/dist/viewer.js), which is missing" in said
    assert "needs npm, which is not on PATH. Install Node.js 18 or later with npm" in said


def test_a_wheel_from_a_fresh_clone_carries_the_built_viewer(clone: Path, tmp_path: Path) -> None:
    if shutil.which("npm") is None:
        pytest.skip("needs npm to build the viewer's bundle (apt-get install nodejs npm)")
    done = _pip_wheel(clone, tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    (wheel,) = tmp_path.glob("graphviz_app-*.whl")
    names = _names(wheel)
    assert set(BUNDLE) <= names
    with zipfile.ZipFile(wheel) as archive:
        script = archive.read(BUNDLE[0]).decode("utf-8")
        assert archive.read(BUNDLE[0]) == (clone / BUNDLE[0]).read_bytes()  # the bundle this build made
    assert "var GraphvizAppViewer=" in script[:100] and "</script" not in script  # the viewer's one global
    assert {"graphviz_app/py.typed", "graphviz_app/web/static/viewer.js", "gradcheck/py.typed"} <= names
    # Only the bundle: no npm packages, no JavaScript sources, no lockfile.
    assert not [n for n in names if "node_modules" in n or "/viewer/src/" in n or n.endswith("package-lock.json")]


def test_an_sdist_carries_bundle_and_sources_and_builds_a_wheel_without_npm(clone: Path, tmp_path: Path) -> None:
    if shutil.which("npm") is None:
        pytest.skip("needs npm to build the viewer's bundle (apt-get install nodejs npm)")
    sdist_dir = tmp_path / "sdist"
    build = f"from setuptools import build_meta; build_meta.build_sdist({str(sdist_dir)!r})"
    done = _run([sys.executable, "-c", build], clone)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    (sdist,) = sdist_dir.glob("graphviz_app-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
        archive.extractall(tmp_path / "unpacked", filter="data")
    assert set(BUNDLE) <= names
    assert {"graphviz_app/viewer/package-lock.json", "graphviz_app/viewer/src/main.js", "setup.py"} <= names
    assert not [n for n in names if "node_modules" in n]

    (unpacked,) = (tmp_path / "unpacked").iterdir()
    done = _pip_wheel(unpacked, tmp_path / "wheel", _without_npm())  # the bundle is there: no npm needed
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = (tmp_path / "wheel").glob("graphviz_app-*.whl")
    assert set(BUNDLE) <= _names(wheel)
