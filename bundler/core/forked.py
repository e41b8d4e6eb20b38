"""Where the bundler's concurrency is chosen, and the one mechanism it keeps: work done ahead
in a forked child, on a second core, while this process does something else.

The library never decides by itself to fork: only the console script, which knows its process
to be one thread, calls `allow_forks()` (forking a process with other threads can leave the
child deadlocked on a lock another thread held). Even then a child is started only where fork
exists, a second core is there, and no other thread runs, Python's or native (where the system
lists them: importing pyarrow starts two). Library callers get the same results in line.

Each use is kept while a benchmark alternating with and without it (whole-process wall time,
ratio of medians with/without) shows a gain; their figures are on docs/performance.md, "What
each mechanism gains":
- collect bundles the later half of many runs in a child while this process bundles the first
  (bundler.local.bundling, `forked_bundling`); on a machine other jobs keep busy it gains
  nothing, the second core not being there to take;
- upload verifies the bundles in a child while this process loads the Hub client
  (bundler.hub.publish.upload);
- sync finds its runs in a child while this process loads the Hub client and the upload's
  verify cache and removes what killed runs left (bundler.local.discoverahead), for a tree of
  about 200 runs or more last time (`discover_ahead_*`).
What showed no gain went: a walk of the output root shared with a child and the Hub client
loaded meanwhile, sync verifying for its upload beside collect, a thread reading a bundle ahead
of verify with a shorter switch interval, a thread compressing small runs' bodies, a thread
looking up the verify cache while the upload's tables code loads, the Hub client's connection
made in a thread meanwhile, a batch's fsyncs left to run while collect writes the next batch
(both cores were busy, the fsyncs' own work among it), and a folder the verify cache vouches
for entirely gathered in line rather than in a child (it gained a few percent in the median,
within the noise over 13 rounds, on an upload and on a no-op sync).
Verify's reading ahead came back in another form (bundler.local.readahead: no process-wide
setting, a thread that seldom waits for the GIL), kept while its own with/without figure
(`read_ahead`) shows a gain.

The child shares nothing with this process but the pipe it writes its result to (pickled),
and leaves with os._exit: no buffer of ours flushed twice, no lock or temporary file of ours
touched. Leaving the block without its result (an error, Ctrl-C) stops it as a stop signal
stops this process (SIGTERM: a child that writes removes its temporary files on the way out),
and kills it if it has not ended within STOP_WAIT seconds. When the child fails, for whatever
reason, the same work is done in line, which then raises what it raises.
A child whose parent is gone (killed with -9, which nothing else would tell it) ends itself
at its next `watch` call rather than go on reading a folder that the next run may be using.
"""

from __future__ import annotations

import os
import pickle
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from bundler.core.errors import STOP_SIGNALS

T = TypeVar("T")
STOP_WAIT = 10.0
"""Seconds a child told to stop may take to clean up before it is killed."""
Watch = Callable[[], None]
"""Called now and then by work in a child: ends the child once its parent is gone."""

_allowed = False


def allow_forks() -> None:
    """Let work be done ahead in forked children from now on: for the console script only,
    which knows its process to have no other thread."""
    global _allowed
    _allowed = True


def can_fork() -> bool:
    """Whether a child may be forked now: forks allowed, a platform with fork, a second core,
    and no other thread, Python's or native. Native threads are counted where the system lists
    them (/proc/self/task): importing pyarrow starts two, so a process that loaded it forks no
    more."""
    return (
        _allowed
        and hasattr(os, "fork")
        and has_second_core()
        and threading.active_count() == 1
        and _native_threads() <= 1
    )


def _native_threads() -> int:
    """This process's threads as the system counts them; 1 where it does not list them."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 1


def has_second_core() -> bool:
    """Whether this process may run on two cores or more: work done beside it, in a child or a
    thread, is worth starting only then."""
    return hasattr(os, "sched_getaffinity") and len(os.sched_getaffinity(0)) > 1


SETTLE_WAIT = 1.0
"""Seconds `threads_that_end` waits at most for the system to stop listing joined threads."""


@contextmanager
def threads_that_end() -> Iterator[None]:
    """For a block that starts threads and joins them all before it ends: on leaving it, wait
    (at most SETTLE_WAIT) until the system lists no more threads than before. A joined thread
    stays listed in /proc/self/task for a moment after `join` returns (86 of 300 three-thread
    fsync pools on a busy machine), and `can_fork` would take it for a native thread that runs
    on. Only where forks are allowed: nothing else looks at that list."""
    before = _native_threads() if _allowed else 0
    try:
        yield
    finally:
        deadline = time.monotonic() + SETTLE_WAIT
        while _allowed and _native_threads() > before and time.monotonic() < deadline:
            time.sleep(0.0005)


def orphan_watch(parent: int) -> Watch:
    """The watch of a child forked by `parent`."""

    def watch() -> None:
        if os.getppid() != parent:
            os._exit(1)

    return watch


@contextmanager
def ahead_in_child(
    in_child: Callable[[Watch], T], in_line: Callable[[], T]
) -> Iterator[Callable[[], T]]:
    """Start `in_child(watch)` in a forked child when `can_fork()`, and give a function that
    waits for its result; otherwise (or when the child fails) that function does
    `in_line()`."""
    if not can_fork():
        yield in_line
        return
    reading, writing = os.pipe()
    parent = os.getpid()
    child = os.fork()
    if child == 0:
        code = 1
        try:
            _stopped_once()
            os.close(reading)
            # Pickled whole before the first byte is written: the parent reads the pipe only
            # once it asks for the result, and pickling into a full pipe would then make it
            # wait for the pickling too, which thousands of verified bundles make long.
            result = pickle.dumps(in_child(orphan_watch(parent)), pickle.HIGHEST_PROTOCOL)
            with os.fdopen(writing, "wb") as out:
                out.write(result)
            code = 0
        finally:
            os._exit(code)
    os.close(writing)
    pipe = os.fdopen(reading, "rb")
    running = True

    def collected() -> T:
        nonlocal running
        with pipe:
            data = pipe.read()
        status = os.waitpid(child, 0)[1]
        running = False
        if os.waitstatus_to_exitcode(status) != 0:
            return in_line()
        result: T = pickle.loads(data)  # our own child's objects, not a stranger's
        return result

    try:
        yield collected
    finally:
        if running:  # its work is of no use any more
            _stop(child)
            pipe.close()


def _stopped_once() -> None:
    """In a child: the first stop signal is acted on as this process's handler would (it
    raises, and the work cleans up on its way out); any later one is ignored, so that the
    SIGTERM the parent sends when it leaves early (it may have had a Ctrl-C of its own) cannot
    cut that clean-up short."""
    for number in STOP_SIGNALS:
        inherited = signal.getsignal(number)
        if callable(inherited):

            def once(
                signum: int, frame: object, inherited: Callable[..., object] = inherited
            ) -> None:
                for each in STOP_SIGNALS:
                    signal.signal(each, signal.SIG_IGN)
                inherited(signum, frame)

            signal.signal(number, once)


def _stop(child: int) -> None:
    """Tell `child` to stop, wait for it, and kill it if it takes longer than STOP_WAIT."""
    os.kill(child, signal.SIGTERM)
    deadline = time.monotonic() + STOP_WAIT
    while os.waitpid(child, os.WNOHANG)[0] == 0:
        if time.monotonic() > deadline:
            os.kill(child, signal.SIGKILL)
            os.waitpid(child, 0)
            return
        time.sleep(0.005)
