"""One version, from the git tag: `pinlab --version`, the package's metadata, what run records and
studies store, and the changelog's newest release all say the same."""

import importlib.metadata
import json
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

import pinlab as package

ROOT = Path(__file__).resolve().parent.parent
RELEASE = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", re.M)


def _installed() -> str:
    return importlib.metadata.version("pinlab")


def _tags_here() -> list[str] | None:
    """The release tags (vX.Y.Z) reachable from this checkout's HEAD, newest first; None without git."""
    try:
        done = subprocess.run(["git", "-C", str(ROOT), "tag", "--merged", "HEAD", "--list", "v*"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    if done.returncode != 0:
        return None
    tags = [t[1:] for t in done.stdout.split() if re.fullmatch(r"v\d+\.\d+\.\d+", t)]
    return sorted(tags, key=lambda v: tuple(map(int, v.split("."))), reverse=True)


def test_the_command_the_package_and_the_module_give_one_version(pinlab):
    shown = pinlab("--version")
    assert shown.returncode == 0 and shown.stdout.strip() == f"pinlab, version {_installed()}", shown


def test_the_module_version_is_the_package_s():
    assert package.__version__ == _installed()
    assert "unbuilt" not in package.__version__, "the installed package carries the version its build wrote"


def test_run_records_and_studies_store_the_version(pinlab, tmp_path):
    record = tmp_path / "r.json"
    ran = pinlab("run", "-c", "0", "--record", str(record), "--", "true")
    assert ran.returncode == 0, ran.stderr
    assert json.loads(record.read_text())["pinlab_version"] == _installed()
    db = tmp_path / "s.db"
    studied = pinlab("study", "--db", str(db), "--name", "v", "-s", "none", "-n", "1", "--runs", "1", "--", "true")
    assert studied.returncode == 0, studied.stderr
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT tool_version FROM studies WHERE name = 'v'").fetchone()[0] == _installed()
        assert conn.execute("SELECT value FROM meta WHERE key = 'created_by'").fetchone()[0] == _installed()


def _derived_from(version: str) -> str | None:
    """The tag a version was made from: X.Y.Z itself, or for X.Y.Z.devN (guess-next-dev: N commits
    after tag X.Y.(Z-1)) that tag; None for a build without tags."""
    exact = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
    if exact:
        return version
    dev = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)\.dev\d+\+g[0-9a-f]+(\.d\d{8})?", version)
    if dev and int(dev.group(3)) > 0:
        return f"{dev.group(1)}.{dev.group(2)}.{int(dev.group(3)) - 1}"
    return None


def test_the_version_comes_from_the_newest_tag_and_the_changelog_names_it():
    releases = RELEASE.findall((ROOT / "CHANGELOG.md").read_text())
    assert releases, "CHANGELOG.md names no release"
    tags = _tags_here()
    if not tags:
        pytest.skip("this checkout has no release tags (a clone without them): the version says 'untagged' and there is nothing to agree with")
    assert releases[0] == tags[0], f"the changelog's newest release {releases[0]} is not the newest tag v{tags[0]}"
    assert _derived_from(_installed()) == tags[0], f"installed version {_installed()} does not come from tag v{tags[0]}: reinstall (make install)"


@pytest.mark.parametrize(
    "version, tag",
    [("0.2.0", "0.2.0"), ("0.2.1.dev3+g1a2b3c4", "0.2.0"), ("0.2.1.dev3+g1a2b3c4.d20261127", "0.2.0"), ("0.0.1.dev9+untagged.g1a2b3c4", None)],
)
def test_a_version_s_tag_is_read_back(version, tag):
    assert _derived_from(version) == tag
