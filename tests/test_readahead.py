"""The read-ahead thread verify reads a large archive with: bounded, in order, and gone when
the block is left, whatever ended it."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from factory import RunSpec
from helpers import build, only_bundle, run_python

from bundler.core.errors import NotCanonicalError
from bundler.local import readahead
from bundler.local.readahead import read_ahead
from bundler.local.verify import read_bundle


def counted(limit: int, made: list[int], fail_at: int | None = None) -> Iterator[int]:
    for number in range(limit):
        if number == fail_at:
            raise NotCanonicalError("zstd", f"broken at {number}")
        made.append(number)
        yield number


def no_reader_left() -> bool:
    return not any(thread.name == "bundler-read-ahead" for thread in threading.enumerate())


def test_items_come_in_order_and_the_thread_is_gone_after() -> None:
    made: list[int] = []
    with read_ahead(counted(1000, made), depth=3) as items:
        assert list(items) == list(range(1000))
    assert no_reader_left()


def test_the_producer_stays_at_most_depth_ahead() -> None:
    made: list[int] = []
    with read_ahead(counted(1000, made), depth=2) as items:
        first = next(items)
        for _ in range(200):  # give the producer every chance to run ahead
            if len(made) >= 4:
                break
            threading.Event().wait(0.005)
        # one handed out, `depth` queued, one made and waiting for room in the queue
        assert first == 0 and len(made) <= 4
    assert no_reader_left()


def test_what_the_producer_raises_is_raised_after_the_items_before_it() -> None:
    made: list[int] = []
    seen: list[int] = []
    with (
        pytest.raises(NotCanonicalError, match="broken at 5"),
        read_ahead(counted(1000, made, fail_at=5), depth=2) as items,
    ):
        seen.extend(items)
    assert seen == [0, 1, 2, 3, 4]
    assert no_reader_left()


def test_leaving_early_stops_the_producer() -> None:
    """The caller refuses the archive at its first chunk: the producer, blocked on a full
    queue, is stopped and joined, having made no more than the queue holds."""
    made: list[int] = []

    class Refused(Exception):
        pass

    with pytest.raises(Refused), read_ahead(counted(10**9, made), depth=2) as items:
        next(items)
        raise Refused
    assert no_reader_left()
    assert len(made) <= 5


def test_a_process_that_read_bundles_ahead_may_fork_again(tmp_path: Path) -> None:
    """The upload's verifying child comes after verify in one process (sync): a read-ahead
    thread, joined but still listed by the system for a moment, must not keep it from forking.
    Every one of 30 readings, forced ahead, must leave a process that may fork."""
    report, _ = build(tmp_path, [RunSpec(rows=3)])
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from bundler.core.forked import allow_forks, can_fork\n"
        "from bundler.local import readahead\n"
        "from bundler.local.verify import read_bundle\n"
        "allow_forks()\n"
        "readahead.READ_AHEAD_MIN_BYTES = 0\n"
        "refused = 0\n"
        "for _ in range(30):\n"
        "    assert read_bundle(Path(sys.argv[1])).verification().ok\n"
        "    refused += not can_fork()\n"
        "print(refused)\n"
    )
    result = run_python(probe, only_bundle(report).archive)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["0"]


def test_a_process_on_one_core_reads_in_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On one core the producer could only take turns with the caller: no thread is started."""
    report, _ = build(tmp_path, [RunSpec(rows=3)])
    probe = (
        "import os\n"
        "from bundler.core.forked import has_second_core\n"
        "before = has_second_core()\n"
        "os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\n"
        "print(before, has_second_core())\n"
    )
    result = run_python(probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(len(os.sched_getaffinity(0)) > 1), "False"]

    def no_thread(items: Iterator[bytes]) -> None:
        raise AssertionError("a read-ahead thread on one core")

    monkeypatch.setattr(readahead, "READ_AHEAD_MIN_BYTES", 0)
    monkeypatch.setattr(readahead, "has_second_core", lambda: False)
    monkeypatch.setattr(readahead, "read_ahead", no_thread)
    assert read_bundle(Path(only_bundle(report).archive)).verification().ok
