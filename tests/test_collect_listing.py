"""A run new to the bundles folder is not stat'ed file by file at discovery: no cache entry
could use that listing. Its listing is taken as it is read (bundler.local.discover.ListingParts),
and must be, byte for byte, the one the next discovery takes, or the nightly run would read
every run twice before trusting its cache."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from factory import RunSpec, write_run, write_tree

from bundler.local.collect import CollectOptions, collect
from bundler.local.discover import discover
from bundler.local.layout import COLLECT_CACHE_NAME

EXPECT = {"expert-vqa": 4}


def _odd_tree(root: Path) -> list[Path]:
    """Runs holding every kind of entry a listing covers: files left out (one a link), a
    folder left out, a run below a run, a prediction under a name not its own; all ten
    seconds old, clear of the cache's racy window."""
    directories = write_tree(
        root,
        [
            RunSpec(model="plain", rows=4),
            RunSpec(model="nested", rows=4),
            RunSpec(model="nested/inner", rows=4),
        ],
        how_do_you=False,
    )
    odd = write_run(root, RunSpec(model="odd", rows=4))
    (odd / "prediction_2.json").rename(odd / "prediction_02.json")
    (odd / "notes.txt").write_text("kept out of the bundle")
    (odd / "linked.txt").symlink_to(odd / "notes.txt")
    (odd / "scratch").mkdir()
    (odd / "scratch" / "a.txt").write_text("left out too")
    directories.append(odd)
    past = time.time_ns() - 10 * 10**9
    for directory in directories:
        for path in [directory, *directory.rglob("*")]:
            os.utime(path, ns=(past, past), follow_symlinks=False)
    return directories


def test_a_new_runs_listing_taken_as_it_is_read_is_the_one_discovery_takes(
    tmp_path: Path,
) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    _odd_tree(out)
    options = CollectOptions(expected_rows=EXPECT)
    seen: list[str] = []
    found = discover(out, listed=lambda directory: seen.append(directory) or False)
    assert seen and all(not run.listed and run.listing is None for run in found.runs)
    first = collect(out, bundles, options)
    assert first.refused == [] and {b.outcome for b in first.bundles} == {"written"}
    entries = json.loads((bundles / COLLECT_CACHE_NAME).read_bytes())["entries"]
    discovered = {os.path.abspath(run.path): run.listing for run in discover(out).runs}
    assert len(entries) == len(discovered) == 4
    for key, entry in entries.items():
        listing = discovered[key]
        assert listing is not None and entry["listing"] == listing.digest
    second = collect(out, bundles, options)
    assert {b.outcome for b in second.bundles} == {"unchanged"}
    assert second.model_dump(exclude={"bundles"}) == first.model_dump(exclude={"bundles"})


def test_only_runs_the_cache_holds_are_stat_ed_at_discovery(tmp_path: Path) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    directories = _odd_tree(out)
    collect(out, bundles, CollectOptions(expected_rows=EXPECT))
    write_run(out, RunSpec(model="newcomer", rows=4))
    listed: dict[str, bool] = {}

    def cached(directory: str) -> bool:
        listed[directory] = directory in {str(path) for path in directories}
        return listed[directory]

    runs = {run.path.name: run for run in discover(out, listed=cached).runs}
    assert runs["newcomer"].listing is None and not runs["newcomer"].listed
    assert all(runs[path.name].listing is not None for path in directories)
    report = collect(out, bundles, CollectOptions(expected_rows=EXPECT))
    outcomes = {Path(bundle.run_directory).name: bundle.outcome for bundle in report.bundles}
    assert outcomes == {"plain": "unchanged", "nested": "unchanged", "inner": "unchanged"} | {
        "odd": "unchanged",
        "newcomer": "written",
    }
    again = collect(out, bundles, CollectOptions(expected_rows=EXPECT))
    assert {bundle.outcome for bundle in again.bundles} == {"unchanged"}


def test_a_file_changed_after_it_was_read_is_read_again(tmp_path: Path) -> None:
    """The listing taken as a run is read holds each file as it was when read: a change after
    it (here, after the collect) shows in the next discovery's listing, and the run is read
    again (its cache entry then holds the new listing)."""
    out, bundles = tmp_path / "out", tmp_path / "b"
    odd = _odd_tree(out)[-1]
    collect(out, bundles, CollectOptions(expected_rows=EXPECT))
    key = os.path.abspath(odd)
    before = json.loads((bundles / COLLECT_CACHE_NAME).read_bytes())["entries"][key]["listing"]
    (odd / "notes.txt").write_text("changed")
    past = time.time_ns() - 10 * 10**9
    os.utime(odd / "notes.txt", ns=(past, past))  # the ctime still tells
    report = collect(out, bundles, CollectOptions(expected_rows=EXPECT))
    assert {bundle.outcome for bundle in report.bundles} == {"unchanged"}
    after = json.loads((bundles / COLLECT_CACHE_NAME).read_bytes())["entries"][key]["listing"]
    (listing,) = [run.listing for run in discover(out).runs if run.path == odd]
    assert listing is not None and after == listing.digest != before
