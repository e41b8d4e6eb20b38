"""sync's runs found ahead in a forked child (bundler/local/discoverahead.py): what the child
sends is what `discover` finds, and a child that fails leaves the error to the parent, which
then says it as a sync finding its runs in line does."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest
from conftest import WRITE_TOKEN
from factory import RunSpec, write_tree
from helpers import FORK_COUNTER, probe_console_script, run_cli, run_cli_process, run_python

from bundler.local.discover import discover
from bundler.local.discoverahead import AHEAD_MIN_CACHE_BYTES, Found
from bundler.local.layout import COLLECT_CACHE_NAME

FOUND_AHEAD = (
    FORK_COUNTER
    + """
import json, sys
from pathlib import Path
from bundler.core.forked import allow_forks
from bundler.local.discoverahead import discovering_ahead
allow_forks()
meanwhile = []
with discovering_ahead(Path(sys.argv[1]), Path(sys.argv[2]), lambda: meanwhile.append(1)) as found:
    discovery = found().discovery
print(json.dumps({"forks": len(forks), "meanwhile": len(meanwhile),
                  "found": discovery.model_dump(mode="json")}))
"""
)


def a_tree_of_every_kind(root: Path) -> Path:
    """Runs at two depths, one with a folder it leaves out, a file outside every run, a link
    (refused) and a folder that is no statics output (skipped)."""
    write_tree(root, [RunSpec(model="org/a", rows=2), RunSpec(model="org/b/deep", rows=1)])
    task = next(root.glob("*_predictions"))
    run = next(path for path in task.rglob("run_meta.json")).parent
    (run / "notes").mkdir()
    (run / "notes" / "n.txt").write_text("x")
    (task / "README.txt").write_text("x")
    os.symlink(run, task / "linked")
    (root / "scratch").mkdir()
    return root


def test_what_the_child_sends_is_what_discover_finds(tmp_path: Path) -> None:
    root = a_tree_of_every_kind(tmp_path / "out")
    found = discover(root)
    assert found.refused and found.skipped and any(run.left_out_folders for run in found.runs)
    sent = pickle.loads(pickle.dumps(Found(found), pickle.HIGHEST_PROTOCOL)).discovery
    assert sent == found
    assert [run.listing for run in sent.runs] == [run.listing for run in found.runs]


def bundles_of_a_large_tree(bundles: Path, size: int = AHEAD_MIN_CACHE_BYTES) -> Path:
    """A bundles folder whose collect cache is `size` bytes: what a tree that large left."""
    bundles.mkdir()
    (bundles / COLLECT_CACHE_NAME).write_bytes(b" " * size)
    return bundles


def test_a_process_of_one_thread_finds_the_runs_in_a_child_with_the_same_result(
    tmp_path: Path,
) -> None:
    root = a_tree_of_every_kind(tmp_path / "out")
    result = run_python(FOUND_AHEAD, root, bundles_of_a_large_tree(tmp_path / "b"))
    assert result.returncode == 0, result.stderr
    state = json.loads(result.stdout)
    assert (state["forks"], state["meanwhile"]) == (1, 1)
    assert state["found"] == discover(root).model_dump(mode="json")


def test_a_tree_small_last_time_is_walked_in_line(tmp_path: Path) -> None:
    """Below AHEAD_MIN_CACHE_BYTES of collect cache (or none) a child would cost more than
    the walk it spares: the runs are found in line, with the same result, and what was to be
    done meanwhile is left to its own time."""
    root = a_tree_of_every_kind(tmp_path / "out")
    small = bundles_of_a_large_tree(tmp_path / "b", AHEAD_MIN_CACHE_BYTES - 1)
    for bundles in (small, tmp_path / "no-bundles-yet"):
        result = run_python(FOUND_AHEAD, root, bundles)
        assert result.returncode == 0, result.stderr
        state = json.loads(result.stdout)
        assert (state["forks"], state["meanwhile"]) == (0, 0)
        assert state["found"] == discover(root).model_dump(mode="json")


def test_an_output_root_the_child_cannot_use_is_refused_as_in_line(tmp_path: Path) -> None:
    """The child fails (no such folder); the parent finds the runs in line, which raises: one
    line naming the folder and exit 2, as a library caller's sync (no child) says it."""
    missing = tmp_path / "no-such-output"
    bundles = bundles_of_a_large_tree(tmp_path / "b")
    args = ("sync", missing, "-o", bundles, "--repo", "org/board", "--json")
    env = {"HF_TOKEN": WRITE_TOKEN}
    forked, in_line = run_cli_process(*args, env=env), run_cli(*args, env=env)
    assert (forked.returncode, in_line.returncode) == (2, 2)
    assert "Traceback" not in forked.stderr
    assert json.loads(forked.stdout)["error"] == json.loads(in_line.stdout)["error"]
    assert f"{missing}: output root does not exist" in json.loads(forked.stdout)["error"]
    code, state = probe_console_script(tmp_path, *args, env=env)
    assert (code, state["forks"]) == (2, 1)  # the child was there, and failed


def test_a_hub_client_that_cannot_load_fails_where_it_always_has(tmp_path: Path) -> None:
    """sync loads the Hub client while its runs are found, only to save time: when the client
    cannot load (a variable it parses as it is imported), collect still runs first and the
    upload fails as before, so the report file says what was collected."""
    env = {"HF_TOKEN": WRITE_TOKEN, "HF_HUB_ETAG_TIMEOUT": "not-a-number"}
    if run_python("from huggingface_hub import constants", env=env).returncode == 0:
        pytest.skip("this huggingface_hub loads whatever HF_HUB_ETAG_TIMEOUT holds")
    root, bundles = tmp_path / "out", bundles_of_a_large_tree(tmp_path / "b")
    write_tree(root, [RunSpec(model="org/a", rows=1)], how_do_you=False)
    report = tmp_path / "report.json"
    args = ("sync", root, "-o", bundles, "--repo", "org/board", "--expect", "expert-vqa=1")
    result = run_cli_process(*args, "--report", report, env=env)
    assert result.returncode == 2 and "internal error" in result.stderr
    written = json.loads(report.read_text())
    assert written["collect"]["bundles"][0]["outcome"] == "written"
    assert len(list(bundles.rglob("*.tar.zst"))) == 1


def test_a_sync_of_a_tree_large_last_time_loads_the_hub_client_as_a_child_walks(
    repo_id: str, tmp_path: Path
) -> None:
    """The runs are found in a child, the Hub client loads meanwhile (it was not loaded when
    that child was forked, and is when upload's verifying child is), and the sync does what it
    does in line: a cache it cannot read is ignored, and the runs are bundled and published."""
    root, bundles = tmp_path / "out", bundles_of_a_large_tree(tmp_path / "b")
    write_tree(root, [RunSpec(model=f"org/m-{n}", rows=1) for n in range(2)], how_do_you=False)
    args = ("sync", root, "-o", bundles, "--repo", repo_id, "--expect", "expert-vqa=1")
    code, state = probe_console_script(tmp_path, *args, env={"HF_TOKEN": WRITE_TOKEN})
    assert code == 0
    assert state["loaded_at_forks"] == [[], ["huggingface_hub"]]
    assert len(list(bundles.rglob("*.tar.zst"))) == 2
