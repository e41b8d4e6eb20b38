"""An upload loads only what its work needs: matplotlib when a chart is drawn, pyarrow's
pandas (which pyarrow imports the first time it turns Python values into a table) when a row is
read or written. Each is a third of a second or more of a command that takes one or two."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import WRITE_TOKEN
from factory import RunSpec
from helpers import run_python
from test_upload import make_bundles

LOADS = """
import atexit, json, sys
watched = ("matplotlib", "pandas")
atexit.register(lambda: print(json.dumps({m: m in sys.modules for m in watched}), file=sys.stderr))
from bundler.cli.app import main
sys.argv[0] = "bundler"
main()
"""
"""A script: the console script, saying at its exit which of `watched` it loaded."""


def loaded(*args: object) -> dict[str, bool]:
    result = run_python(LOADS, *args, "--json", env={"HF_TOKEN": WRITE_TOKEN})
    assert result.returncode == 0, result.stderr
    said: dict[str, bool] = json.loads(result.stderr.strip().splitlines()[-1])
    return said


def test_a_board_without_a_defined_task_never_loads_matplotlib(
    repo_id: str, tmp_path: Path
) -> None:
    bundles = make_bundles(tmp_path, [RunSpec(task="alpha", rows=2)])
    assert loaded("upload", bundles, "--repo", repo_id)["matplotlib"] is False


def test_an_upload_with_nothing_new_reads_no_row(repo_id: str, tmp_path: Path) -> None:
    bundles = make_bundles(tmp_path, [RunSpec(task="alpha", rows=2)])
    loaded("upload", bundles, "--repo", repo_id)  # publishes: its rows are written
    assert loaded("upload", bundles, "--repo", repo_id) == {"matplotlib": False, "pandas": False}
