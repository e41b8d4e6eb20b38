"""Crash-safe writes: temporary files that mark themselves alive, a pair committed sidecar
last, signals held during the commit, and the clean-up of what a killed run left."""

from __future__ import annotations

import fcntl
import os
import signal
from pathlib import Path

import pytest

from bundler.core.errors import InputError, WriteError
from bundler.local.fileio import (
    StagedFile,
    commit_pair,
    read_bounded,
    remove_leftovers,
    remove_unowned,
    signals_held,
)
from bundler.local.layout import TEMP_PREFIX, TEMP_SUFFIX, is_temporary_name


def staged(final: Path, data: bytes) -> StagedFile:
    file = StagedFile(final)
    file.handle.write(data)
    file.finish()
    return file


def test_a_staged_file_is_named_by_the_pattern_and_removed_unless_committed(
    tmp_path: Path,
) -> None:
    final = tmp_path / "p" / "t@unpinned.tar.zst"
    with StagedFile(final) as file:
        assert file.path.parent == final.parent
        assert file.path.name.startswith(f"{TEMP_PREFIX}{final.name}.")
        assert is_temporary_name(file.path.name) and file.path.name.endswith(TEMP_SUFFIX)
        file.handle.write(b"data")
    assert list(final.parent.iterdir()) == []


def test_a_write_error_names_the_file_and_leaves_nothing(tmp_path: Path) -> None:
    final = tmp_path / "a.tar.zst"
    no_space = r"a\.tar\.zst: cannot write: the disk is full"
    with pytest.raises(WriteError, match=no_space) as caught, StagedFile(final):
        raise OSError(28, "No space left on device")
    assert caught.value.path == str(final)
    assert list(tmp_path.iterdir()) == []


def test_commit_replaces_the_pair_sidecar_last(tmp_path: Path) -> None:
    archive, sidecar = tmp_path / "t.tar.zst", tmp_path / "t.json"
    archive.write_bytes(b"old archive")
    sidecar.write_bytes(b"old sidecar")
    with staged(archive, b"new archive") as new_archive, staged(sidecar, b"new sidecar") as side:
        commit_pair(new_archive, side)
    assert (archive.read_bytes(), sidecar.read_bytes()) == (b"new archive", b"new sidecar")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["t.json", "t.tar.zst"]
    assert oct(archive.stat().st_mode & 0o777) == oct(0o644)


def test_a_failed_commit_never_leaves_a_sidecar_beside_another_archive(tmp_path: Path) -> None:
    archive, sidecar = tmp_path / "t.tar.zst", tmp_path / "t.json"
    archive.write_bytes(b"old archive")
    sidecar.write_bytes(b"old sidecar")
    with staged(archive, b"new archive") as new_archive, staged(sidecar, b"new sidecar") as side:
        new_archive.path.unlink()  # the archive's rename will fail, after the old sidecar went
        with pytest.raises(WriteError, match=r"t\.tar\.zst: cannot write"):
            commit_pair(new_archive, side)
    # The old archive is left uncommitted (no sidecar), never with a sidecar not its own.
    assert sorted(path.name for path in tmp_path.iterdir()) == ["t.tar.zst"]
    assert archive.read_bytes() == b"old archive"


def test_remove_unowned_removes_what_was_neither_committed_nor_closed(tmp_path: Path) -> None:
    """A stop signal can land after a temporary file is made and before its owner holds it;
    `remove_unowned` (run when a command stops) removes such a file, and nothing else."""
    committed = staged(tmp_path / "kept.json", b"kept")
    committed.commit()
    StagedFile(tmp_path / "closed.json").close()
    lost = StagedFile(tmp_path / "lost.json").path  # the owner never held it
    assert lost.exists()
    remove_unowned()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["kept.json"]
    committed.close()  # its owner, later: nothing more to do
    assert (tmp_path / "kept.json").read_bytes() == b"kept"


def test_a_forked_child_removes_its_own_temporary_files_never_its_parents(
    tmp_path: Path,
) -> None:
    parents = StagedFile(tmp_path / "parent.json")
    child = os.fork()
    if child == 0:  # pragma: no cover - the child's outcome is its exit code
        own = StagedFile(tmp_path / "child.json").path
        remove_unowned()
        os._exit(0 if not own.exists() else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0
    assert [path for path in tmp_path.iterdir()] == [parents.path]  # the child's is gone
    parents.close()


def test_signals_are_held_until_the_block_is_done() -> None:
    reached_the_end = False
    # Python's own handler, whatever a test before this one in the same worker left in place
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt), signals_held():
            signal.raise_signal(signal.SIGINT)  # to this thread: os.kill may reach another
            reached_the_end = True
        assert reached_the_end
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_held_sigterm_is_acted_on_by_the_handler_in_place(tmp_path: Path) -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda number, frame: seen.append(number))
    try:
        with signals_held():
            signal.raise_signal(signal.SIGTERM)
            assert seen == []
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_leftovers_of_the_bundler_pattern_are_removed_and_nothing_else(tmp_path: Path) -> None:
    player = tmp_path / "gpt-5-2_1054f537"
    player.mkdir()
    stale = player / f"{TEMP_PREFIX}maze@unpinned.tar.zst.k2j4h5g6{TEMP_SUFFIX}"
    stale.write_bytes(b"half an archive")
    kept = {
        player / "maze@unpinned.tar.zst": b"a bundle",
        player / "notes.partial": b"not ours",
        player / f".other.tar.zst.abcdefgh{TEMP_SUFFIX}": b"not ours either",
        player / f"{TEMP_PREFIX}maze@unpinned.json.zzzzzzzz.tmp": b"another suffix",
        tmp_path / f"{TEMP_PREFIX}top-level{TEMP_SUFFIX}": b"collect never writes here",
        tmp_path / ".rejected" / "p" / f"{TEMP_PREFIX}x{TEMP_SUFFIX}": b"hidden folder",
    }
    for path, data in kept.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (tmp_path / f"{TEMP_PREFIX}download-abc").mkdir()
    link = player / f"{TEMP_PREFIX}link{TEMP_SUFFIX}"
    link.symlink_to(tmp_path / "gpt-5-2_1054f537" / "maze@unpinned.tar.zst")
    busy = player / f"{TEMP_PREFIX}maze@unpinned.json.a1b2c3d4{TEMP_SUFFIX}"
    busy.write_bytes(b"being written by a live collect")
    with busy.open("rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        assert remove_leftovers(tmp_path) == [stale]
    assert not stale.exists() and busy.exists() and link.is_symlink()
    assert all(path.read_bytes() == data for path, data in kept.items())
    assert (tmp_path / f"{TEMP_PREFIX}download-abc").is_dir()
    assert remove_leftovers(tmp_path) == [busy]  # no longer held: a leftover now


def test_no_bundles_folder_yet_means_nothing_to_remove(tmp_path: Path) -> None:
    assert remove_leftovers(tmp_path / "missing") == []


@pytest.mark.parametrize("size", [0, 1, 4096, 5000])
def test_read_bounded_reads_up_to_the_bound_and_refuses_one_byte_more(
    tmp_path: Path, size: int
) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(os.urandom(size))
    assert read_bounded(path, size) == path.read_bytes()
    if size:
        with pytest.raises(InputError, match=f"f.json: larger than {size - 1} bytes"):
            read_bounded(path, size - 1)


@pytest.mark.skipif(not Path(f"/proc/{os.getpid()}/cmdline").exists(), reason="no /proc")
def test_a_file_holding_more_than_its_stated_size_is_read_whole_and_still_bounded() -> None:
    """A file read after its first chunk (one that grew after it was opened, here a /proc file
    whose stated size is 0) is read whole, and bounded all the same."""
    path = f"/proc/{os.getpid()}/cmdline"
    whole = Path(path).read_bytes()
    assert os.stat(path).st_size == 0 and len(whole) > 20
    assert read_bounded(path, len(whole)) == whole
    assert read_bounded(path, 1 << 20) == whole
    with pytest.raises(InputError, match="larger than"):
        read_bounded(path, len(whole) - 1)
