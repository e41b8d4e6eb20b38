"""An upload loads only what its work needs: matplotlib when a chart is drawn, pyarrow's
pandas (which pyarrow imports the first time it turns Python values into a table) when a row is
read or written. Each is a third of a second or more of a command that takes one or two."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import WRITE_TOKEN
from factory import RunSpec
from helpers import probe_console_script, run_python
from hubserver import HubServer
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


NOT_ON_THE_WAY = {
    "bundler.local.verify",
    "bundler.local.diff",
    "bundler.local.signature",
    "bundler.local.allowed_signers",
}
"""What an upload of new, unsigned bundles to a board without signers does not run in the
command's own process: verifying (done in a child, or vouched for by the verify cache),
comparing a bundle with the Hub's copy, and reading signatures (`cryptography`)."""


def test_an_upload_of_new_bundles_loads_no_verifying_diffing_or_signatures(
    hub: HubServer, repo_id: str, tmp_path: Path
) -> None:
    bundles = make_bundles(tmp_path, [RunSpec(task="alpha", rows=2), RunSpec(rows=2)])
    env = {"HF_TOKEN": WRITE_TOKEN}
    for attempt, repo in enumerate((repo_id, f"{repo_id}-again")):
        if attempt:
            hub.create_repo(repo)  # new bundles again, now vouched for by the verify cache
        code, state = probe_console_script(tmp_path, "upload", bundles, "--repo", repo, env=env)
        assert code == 0
        assert NOT_ON_THE_WAY & set(state["loaded"]) == set()
        assert "bundler.local.verifycache" in state["loaded"]
