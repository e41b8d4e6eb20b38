"""The nightly run costs nothing when nothing changed: collect's stat cache, the batched and
skipped writes, and upload's verification cache (bundler.local.statcache), on real files.

"Without reading" is proven by counting the files opened: a test-local audit hook records the
path of every `open` (os.open and the built-in open both raise the event) while a collect or
a gather runs.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from factory import RunSpec, write_tree
from helpers import FORK_COUNTER, run_python

from bundler.core.limits import MAX_CACHE_BYTES
from bundler.core.progress import NoProgress
from bundler.hub.publish.upload import gather_local
from bundler.local.bundling import FORK_WEIGHT, RUN_WEIGHT
from bundler.local.collect import CollectOptions, CollectReport, collect
from bundler.local.layout import (
    COLLECT_CACHE_NAME,
    TEMP_PREFIX,
    TEMP_SUFFIX,
    VERIFY_CACHE_NAME,
)
from bundler.local.manifest import Sidecar
from bundler.local.submitter import Submitter
from bundler.local.verifycache import SidecarFacts

_opened: list[str] | None = None


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _opened is not None and args and args[0] is not None:
        path = args[0]
        _opened.append(os.fsdecode(path) if isinstance(path, str | bytes) else str(path))


sys.addaudithook(_audit)  # hooks cannot be removed: this one records only inside `opens()`


@contextmanager
def opens() -> Iterator[list[str]]:
    """The paths opened inside the block."""
    global _opened
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


def opened_below(paths: list[str], top: Path) -> list[str]:
    """The files opened below `top`: a folder opened to be listed (discovery lists each one
    through a descriptor) reads no file."""
    prefix = str(top) + os.sep
    return [
        path
        for path in paths
        if os.path.abspath(path).startswith(prefix)
        and (os.path.islink(path) or not os.path.isdir(path))
    ]


RUNS = [RunSpec(model=f"model-{number}", rows=3) for number in range(3)]


def make_tree(root: Path) -> list[Path]:
    """Three runs whose files are ten seconds old: clear of the racy window of any cache."""
    directories = write_tree(root, RUNS, how_do_you=False)
    past = time.time_ns() - 10 * 10**9
    for directory in directories:
        for path in directory.iterdir():
            os.utime(path, ns=(past, past))
    return directories


def run_collect(root: Path, bundles: Path, **options: object) -> CollectReport:
    return collect(
        root, bundles, CollectOptions.model_validate({"allow_partial": False, **options})
    )


def statuses(report: CollectReport) -> dict[str, str]:
    return {Path(bundle.run_directory).name: bundle.outcome for bundle in report.bundles}


def test_unchanged_runs_are_skipped_without_opening_a_file_and_reported_the_same(
    tmp_path: Path,
) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    make_tree(out)
    first = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    assert {bundle.outcome for bundle in first.bundles} == {"written"}
    assert (bundles / COLLECT_CACHE_NAME).is_file()
    with opens() as opened:
        second = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    assert opened_below(opened, out) == []  # not one input file, nor run_meta.json
    assert opened_below(opened, bundles / "model-0_") == []
    full = run_collect(out, bundles, expected_rows={"expert-vqa": 3}, full=True)
    # The skipped runs are reported exactly as reading them reports them.
    assert second.model_dump() == full.model_dump()
    assert {bundle.outcome for bundle in second.bundles} == {"unchanged"}
    assert [b.model_dump(exclude={"outcome"}) for b in second.bundles] == [
        b.model_dump(exclude={"outcome"}) for b in first.bundles
    ]


def test_full_reads_every_run_again(tmp_path: Path) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    directories = make_tree(out)
    run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    with opens() as opened:
        report = run_collect(out, bundles, expected_rows={"expert-vqa": 3}, full=True)
    for directory in directories:
        assert str(directory / "prediction_2.json") in opened
    assert set(statuses(report).values()) == {"unchanged"}


def read_runs(opened: list[str], directories: list[Path]) -> list[str]:
    """The runs whose run_meta.json was opened."""
    return [d.name for d in directories if str(d / "run_meta.json") in opened]


def test_a_changed_file_is_noticed(tmp_path: Path) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    directories = make_tree(out)
    run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    prediction = directories[1] / "prediction_0.json"
    record = json.loads(prediction.read_text())
    record["output"] = "a different answer"
    prediction.write_text(json.dumps(record))
    with opens() as opened:
        report = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    assert read_runs(opened, directories) == ["model-1"]
    assert statuses(report) == {
        "model-0": "unchanged",
        "model-1": "replaced",
        "model-2": "unchanged",
    }


def test_new_content_with_the_same_size_and_mtime_is_noticed_by_its_ctime(
    tmp_path: Path,
) -> None:
    """git's trade-off: a rewrite that keeps size and mtime (os.utime) still moves the ctime,
    which the cache keys on, so the run is read again and its bundle replaced."""
    out, bundles = tmp_path / "out", tmp_path / "b"
    directories = make_tree(out)
    run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    prediction = directories[2] / "prediction_1.json"
    before = prediction.stat()
    data = prediction.read_bytes()
    changed = data.replace(b'"output": "answer 1"', b'"output": "answEr 1"', 1)
    assert changed != data and len(changed) == len(data)
    time.sleep(0.01)
    prediction.write_bytes(changed)
    os.utime(prediction, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = prediction.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert after.st_ctime_ns != before.st_ctime_ns
    with opens() as opened:
        report = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    assert read_runs(opened, directories) == ["model-2"]
    assert statuses(report)["model-2"] == "replaced"


def test_an_added_or_removed_file_is_noticed(tmp_path: Path) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    directories = make_tree(out)
    run_collect(out, bundles, allow_partial=True)
    (directories[0] / "notes.txt").write_text("a note")
    (directories[1] / "prediction_2.json").unlink()
    with opens() as opened:  # --replace: a run with fewer rows would otherwise keep its bundle
        report = run_collect(out, bundles, allow_partial=True, replace=True)
    assert read_runs(opened, directories) == ["model-0", "model-1"]
    warnings = {Path(b.run_directory).name: b.warnings for b in report.bundles}
    assert any("notes.txt" in warning for warning in warnings["model-0"])
    assert [b.predictions for b in report.bundles] == [3, 2, 3]


def test_two_files_swapped_keeping_every_name_size_and_mtime_are_noticed(
    tmp_path: Path,
) -> None:
    """Renames that leave the run listing the same names, sizes and mtimes still change which
    file (inode, ctime) each name holds, which the cache keys on: the run is read again."""
    out, bundles = tmp_path / "out", tmp_path / "b"
    directories = make_tree(out)
    run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    first, second = directories[1] / "prediction_0.json", directories[1] / "prediction_2.json"
    before = {path.name: path.stat() for path in (first, second)}
    assert before[first.name].st_size == before[second.name].st_size
    parked = directories[1] / "parked"
    first.rename(parked)
    second.rename(first)
    parked.rename(second)
    for path in (first, second):
        status = before[path.name]
        os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))
        assert (path.stat().st_size, path.stat().st_mtime_ns) == (
            status.st_size,
            status.st_mtime_ns,
        )
    with opens() as opened:
        report = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    assert read_runs(opened, directories) == ["model-1"]
    assert statuses(report)["model-0"] == "unchanged"


def test_a_link_swapped_in_for_a_file_is_noticed(tmp_path: Path) -> None:
    """A prediction replaced by a link to the same bytes, the link's own mtime set to the
    file's: the run is read again, and refused for the link (links are never followed)."""
    out, bundles = tmp_path / "out", tmp_path / "b"
    directories = make_tree(out)
    run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    prediction = directories[2] / "prediction_1.json"
    before = prediction.stat()
    copy = tmp_path / "elsewhere.json"
    copy.write_bytes(prediction.read_bytes())
    prediction.unlink()
    prediction.symlink_to(copy)
    os.utime(prediction, ns=(before.st_atime_ns, before.st_mtime_ns), follow_symlinks=False)
    with opens() as opened:
        report = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    assert opened_below(opened, directories[0]) == []
    assert [Path(refused.path).name for refused in report.refused] == ["model-2"]
    assert statuses(report) == {"model-0": "unchanged", "model-1": "unchanged"}


@pytest.mark.parametrize(
    "changed",
    [
        {"expected_rows": {"expert-vqa": 4}, "allow_partial": True},
        {"expected_rows": {"expert-vqa": 3}, "submitter": Submitter(name="Ada")},
        {"expected_rows": {"expert-vqa": 3}, "level": 5},
        {"expected_rows": {"expert-vqa": 3}, "allow_partial": True},
    ],
    ids=["expect", "submitter", "level", "allow-partial"],
)
def test_a_changed_option_is_noticed(tmp_path: Path, changed: dict[str, object]) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    directories = make_tree(out)
    run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    with opens() as opened:  # --replace: a weaker claim (4 expected) would otherwise be kept
        report = run_collect(out, bundles, **changed, replace=True)
    assert read_runs(opened, directories) == [d.name for d in directories]
    fresh = run_collect(out, tmp_path / "fresh", **changed)
    assert [b.sha256 for b in report.bundles] == [b.sha256 for b in fresh.bundles]


def test_a_file_as_new_as_the_cache_is_read_again(tmp_path: Path) -> None:
    """git's racy rule: a file whose mtime is not older than the cache file's own may have
    changed within the timestamp's granularity after it was stat'ed, so it is not trusted."""
    out, bundles = tmp_path / "out", tmp_path / "b"
    directories = make_tree(out)
    future = time.time_ns() + 3600 * 10**9  # as new as any cache written in the next hour
    os.utime(directories[0] / "metrics.json", ns=(future, future))
    run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    for _ in range(2):
        with opens() as opened:
            report = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
        assert read_runs(opened, directories) == ["model-0"]
        assert set(statuses(report).values()) == {"unchanged"}


def test_a_corrupt_or_huge_cache_is_ignored(tmp_path: Path) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    directories = make_tree(out)
    run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    cache = bundles / COLLECT_CACHE_NAME
    for content in (b"{not json", b'{"format": 1, "entries": []}', b"\xff\xfe", b"[]"):
        cache.write_bytes(content)
        with opens() as opened:
            report = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
        assert read_runs(opened, directories) == [d.name for d in directories]
        assert report.exit_code == 0 and set(statuses(report).values()) == {"unchanged"}
    with cache.open("wb") as handle:  # sparse: larger than the cap, never loaded
        handle.truncate(MAX_CACHE_BYTES + 1)
    with opens() as opened:
        report = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    assert read_runs(opened, directories) == [d.name for d in directories]
    assert cache.stat().st_size < MAX_CACHE_BYTES  # written again, usable
    with opens() as opened:
        run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    assert read_runs(opened, directories) == []


def test_a_bundle_removed_or_changed_since_is_rebuilt(tmp_path: Path) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    make_tree(out)
    first = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    archive, sidecar = Path(first.bundles[0].archive), Path(first.bundles[1].sidecar)
    original = sidecar.read_bytes()
    archive.unlink()
    sidecar.write_bytes(original.replace(b"{", b"{ ", 1))
    report = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    assert statuses(report) == {
        "model-0": "written",
        "model-1": "unchanged",
        "model-2": "unchanged",
    }
    assert archive.is_file() and sidecar.read_bytes() == original


def test_an_unchanged_bundle_read_again_is_neither_fsynced_nor_renamed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    make_tree(out)
    first = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    before = {b.archive: os.stat(b.archive) for b in first.bundles}
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(descriptor: int) -> None:  # the real fsync, counted
        synced.append(descriptor)
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    report = run_collect(out, bundles, expected_rows={"expert-vqa": 3}, full=True)
    assert set(statuses(report).values()) == {"unchanged"}
    assert synced == []
    for path, status in before.items():
        now = os.stat(path)
        assert (now.st_ino, now.st_mtime_ns, now.st_ctime_ns) == (
            status.st_ino,
            status.st_mtime_ns,
            status.st_ctime_ns,
        )
    assert [p.name for p in bundles.rglob("*") if p.name.startswith(".bundler-")] == []


def recorded_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The path of every file and folder fsynced from now on (the real fsync, each named)."""
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(descriptor: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{descriptor}"))
        real_fsync(descriptor)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    return synced


def test_the_folders_collect_makes_are_fsynced_into_their_parents(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new bundles folder and a new player's folder are fsynced into the folder above them,
    so a crash cannot lose them (and the archives fsynced inside them) after collect said
    "written"."""
    out, bundles = tmp_path / "out", tmp_path / "new" / "b"
    make_tree(out)
    synced = recorded_fsyncs(monkeypatch)
    report = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    players = {Path(b.archive).parent for b in report.bundles}
    assert players and {p.parent for p in players} == {bundles}
    for made in [tmp_path / "new", bundles, *players]:
        assert str(made.parent) in synced, f"{made.parent} never fsynced after {made.name} was made"
    synced.clear()
    run_collect(out, bundles, expected_rows={"expert-vqa": 3}, full=True)
    assert str(bundles) not in synced and str(tmp_path) not in synced


def test_the_folders_of_many_new_players_are_fsynced_once_a_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """70 new players' folders: the bundles folder holding them is fsynced with each batch of
    pairs (DurableBatch), not once for each folder made, and before any pair is reported."""
    out, bundles = tmp_path / "out", tmp_path / "b"
    write_tree(out, [RunSpec(model=f"m-{n}", rows=2) for n in range(70)], how_do_you=False)
    synced = recorded_fsyncs(monkeypatch)
    report = run_collect(out, bundles, expected_rows={"expert-vqa": 2})
    assert len(report.bundles) == 70
    assert 1 <= synced.count(str(bundles)) <= 3, synced.count(str(bundles))
    for bundle in report.bundles:
        assert str(Path(bundle.archive).parent) in synced


def test_many_new_runs_are_committed_in_batches_each_pair_whole(tmp_path: Path) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    write_tree(out, [RunSpec(model=f"m-{n}", rows=2) for n in range(70)], how_do_you=False)
    report = run_collect(out, bundles, expected_rows={"expert-vqa": 2})
    assert len(report.bundles) == 70 and {b.outcome for b in report.bundles} == {"written"}
    assert [Path(b.run_directory).name for b in report.bundles] == sorted(
        (f"m-{n}" for n in range(70)), key=lambda name: name
    )
    from bundler.local.verify import verify

    assert verify([bundles]).exit_code == 0
    assert [p for p in bundles.rglob("*") if p.name.startswith(".bundler-")] == []


def gather(bundles: Path) -> tuple[list[str], list[str]]:
    local, set_aside = gather_local(bundles, allow_partial=False, progress=NoProgress())
    return [b.bundle_id for b in local], [p.bundle_id for p in set_aside if p.action == "refused"]


def test_upload_does_not_verify_an_unchanged_archive_again(tmp_path: Path) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    make_tree(out)
    run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    with opens() as opened:
        first_local, first_refused = gather(bundles)
    assert len(first_local) == 3 and first_refused == []
    assert len([p for p in opened if p.endswith(".tar.zst")]) == 3
    assert (bundles / VERIFY_CACHE_NAME).is_file()
    time.sleep(0.02)  # past the racy window of the cache just written
    os.utime(bundles / VERIFY_CACHE_NAME)
    with opens() as opened:
        again = gather_local(bundles, allow_partial=False, progress=NoProgress())
    assert [p for p in opened if p.endswith(".tar.zst")] == []  # no archive opened
    fresh = gather_local(bundles, allow_partial=False, progress=NoProgress())
    assert [(b.bundle_id, b.sidecar, b.sidecar_data, b.metrics_text) for b in again[0]] == [
        (b.bundle_id, b.sidecar, b.sidecar_data, b.metrics_text) for b in fresh[0]
    ]


def test_an_archive_tampered_keeping_size_and_mtime_is_verified_again_and_refused(
    tmp_path: Path,
) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    make_tree(out)
    report = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    gather(bundles)
    archive = Path(report.bundles[1].archive)
    before = archive.stat()
    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0x01
    time.sleep(0.01)
    archive.write_bytes(bytes(data))
    os.utime(archive, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert archive.stat().st_size == before.st_size
    assert archive.stat().st_mtime_ns == before.st_mtime_ns
    for _ in range(2):  # a refused bundle is never cached: verified again every time
        with opens() as opened:
            local, refused = gather(bundles)
        assert [p for p in opened if p.endswith(".tar.zst")] == [str(archive)]
        assert refused == [report.bundles[1].bundle_id] and len(local) == 2


def test_an_unchanged_bundles_facts_come_from_the_cache_and_mistyped_ones_are_not_trusted(
    tmp_path: Path,
) -> None:
    """Planning asks every bundle for its id, archive, coverage and statics: for an unchanged
    one they come from the verification cache, its sidecar unparsed. What the cache says must
    be what the sidecar says; facts a hand-edited cache mistyped are not taken (the bundle is
    verified again), and statics it spoiled are read from the sidecar itself."""
    out, bundles = tmp_path / "out", tmp_path / "b"
    make_tree(out)
    run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    gather(bundles)
    time.sleep(0.02)  # past the racy window of the cache just written
    os.utime(bundles / VERIFY_CACHE_NAME)
    cached, _ = gather_local(bundles, allow_partial=False, progress=NoProgress())
    for bundle in cached:
        assert bundle.verified.parsed is None  # not parsed to plan
        sidecar = Sidecar.model_validate_json(bundle.sidecar_data)
        assert bundle.verified.facts == SidecarFacts.of(sidecar)
        assert bundle.verified.statics == sidecar.statics

    cache = json.loads((bundles / VERIFY_CACHE_NAME).read_bytes())
    first, second = sorted(cache["entries"])[:2]
    cache["entries"][first]["sidecar"]["rows_present"] = "3"  # mistyped: verified again
    cache["entries"][second]["sidecar"]["statics"] = {"task_name": "../escape"}
    (bundles / VERIFY_CACHE_NAME).write_text(json.dumps(cache))
    time.sleep(0.02)
    with opens() as opened:
        local, refused = gather_local(bundles, allow_partial=False, progress=NoProgress())
    assert refused == [] and len(local) == 3
    assert [p for p in opened if p.endswith(".tar.zst")] == [str(bundles / first)]
    spoiled = next(bundle for bundle in local if str(bundle.archive).endswith(second))
    assert spoiled.verified.statics == spoiled.sidecar.statics  # from the sidecar's own bytes
    assert spoiled.verified.statics.task_name == "expert-vqa"


def test_a_corrupt_verification_cache_is_ignored(tmp_path: Path) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    make_tree(out)
    run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    gather(bundles)
    (bundles / VERIFY_CACHE_NAME).write_bytes(b'{"format": 1, "kind": "verify", "entries": 7}')
    with opens() as opened:
        local, refused = gather(bundles)
    assert len(local) == 3 and refused == []
    assert len([p for p in opened if p.endswith(".tar.zst")]) == 3


def test_a_cache_write_left_by_a_killed_run_is_removed(tmp_path: Path) -> None:
    out, bundles = tmp_path / "out", tmp_path / "b"
    make_tree(out)
    run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    leftover = bundles / f"{TEMP_PREFIX}{COLLECT_CACHE_NAME}.x1y2z3{TEMP_SUFFIX}"
    leftover.write_bytes(b"{")
    other = bundles / f"{TEMP_PREFIX}something-else.x1y2z3{TEMP_SUFFIX}"
    other.write_bytes(b"not ours to judge")
    report = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    assert report.removed_temporaries == [str(leftover)]
    assert not leftover.exists() and other.exists()


FORKED_COLLECT = (
    FORK_COUNTER
    + """
import json, sys
from pathlib import Path
from bundler.core.forked import allow_forks
from bundler.local.collect import CollectOptions, collect
from bundler.local.collectcache import CollectCache

if sys.argv[3] == "child fails":
    def fail(cache: CollectCache) -> None:
        raise RuntimeError("the child fails")
    CollectCache.keep_apart = fail  # called in the child only
if sys.argv[3] != "in line":
    allow_forks()  # as the console script does
options = CollectOptions(expected_rows={"expert-vqa": int(sys.argv[4])})
report = collect(Path(sys.argv[1]), Path(sys.argv[2]), options)
print(json.dumps({"forks": len(forks), "report": report.model_dump(mode="json")}))
"""
)


def test_many_runs_bundled_half_in_a_forked_child_give_what_one_process_gives(
    tmp_path: Path,
) -> None:
    """Past FORK_WEIGHT of work the console script bundles the later half of the runs in a
    forked child: the bundles must be byte for byte, the report (refusals in their order
    included) exactly, what one process gives, the child's stat cache entries must reach the
    cache, and a child that fails must have its half done in line."""
    rows = 10
    count = FORK_WEIGHT // (rows + RUN_WEIGHT) + 4
    out = tmp_path / "out"
    directories = write_tree(
        out, [RunSpec(model=f"m-{n:03d}", rows=rows) for n in range(count)], how_do_you=False
    )
    for broken in (directories[1], directories[-2]):  # one refusal in either half
        (broken / "prediction_3.json").write_text("{")
    past = time.time_ns() - 10 * 10**9
    for path in out.rglob("*"):
        os.utime(path, ns=(past, past))

    def collected(how: str) -> dict[str, object]:
        bundles = tmp_path / how.replace(" ", "-")
        result = run_python(FORKED_COLLECT, out, bundles, how, rows)
        assert result.returncode == 0, result.stderr
        state: dict[str, object] = json.loads(result.stdout.replace(str(bundles), "BUNDLES"))
        files = sorted(bundles.rglob("*.tar.zst")) + sorted(bundles.rglob("*.json"))
        state["files"] = {str(p.relative_to(bundles)): p.read_bytes() for p in files}
        return state

    forked, in_line, failed = collected("fork"), collected("in line"), collected("child fails")
    assert (forked["forks"], in_line["forks"], failed["forks"]) == (1, 0, 1)
    assert forked["report"] == in_line["report"] == failed["report"]
    assert forked["files"] == in_line["files"] == failed["files"]
    report = CollectReport.model_validate(forked["report"])
    assert len(report.bundles) == count - 2
    assert [Path(refusal.path).name for refusal in report.refused] == [
        "m-001",
        f"m-{count - 2:03d}",
    ]
    with opens() as opened:
        again = run_collect(out, tmp_path / "fork", expected_rows={"expert-vqa": rows})
    read = {Path(path).parent.name for path in opened_below(opened, out)}
    assert read == {"m-001", f"m-{count - 2:03d}"}  # only the refused runs: never cached
    assert {bundle.outcome for bundle in again.bundles} == {"unchanged"}
    again_forked = collected("fork")  # only the two refused runs to read: in line
    assert again_forked["forks"] == 0


def test_runs_below_a_folder_whose_name_is_not_utf8_are_skipped_too(tmp_path: Path) -> None:
    """Their paths, kept with lone surrogates (os.fsdecode), are the cache's keys: a cache that
    holds one must still be read, not ignored every night (pydantic_core's JSON parser, for
    one, refuses a lone surrogate that the standard library's takes)."""
    out, bundles = tmp_path / os.fsdecode(b"out\xff"), tmp_path / "b"
    directories = make_tree(out)
    first = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    assert set(statuses(first).values()) == {"written"}
    assert b"\\udcff" in (bundles / COLLECT_CACHE_NAME).read_bytes()
    with opens() as opened:
        second = run_collect(out, bundles, expected_rows={"expert-vqa": 3})
    assert read_runs(opened, directories) == []
    assert set(statuses(second).values()) == {"unchanged"}
