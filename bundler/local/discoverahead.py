"""Discovery done ahead in a forked child (bundler.core.forked), while the process that will
collect does something else: `sync` loads the Hub client and the bundles folder's verify cache
meanwhile, which its upload needs later anyway, and collect removes what killed runs left in
the folder (bundler.local.collect), which needs no run.

A nightly sync with nothing new spends most of its collect listing the output root (tens of
thousands of entries, each lstat'ed for the stat cache) and, apart from that, about as long
importing the Hub client: neither needs the other, so on a second core they overlap. The child
only reads (the walk, never a file's contents) and sends back plain values; the parent makes
the same `Discovery` of them that `discover` would have made. When no child may be forked, or
it fails (an unusable output root among others), `discover` runs in line when the result is
asked for, and raises what it raises then.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bundler.core.forked import ahead_in_child, can_fork
from bundler.local.discover import Discovery, Listing, RunDirectory, Skipped, discover
from bundler.local.layout import COLLECT_CACHE_NAME

_Run = tuple[str, str, str, int, tuple[str, ...], str | None, int]


class Found:
    """A `Discovery`, pickled as plain values when a child sends it: thousands of runs pickled
    as models would take longer to load than the walk they spare."""

    def __init__(self, discovery: Discovery) -> None:
        self.discovery = discovery

    def __reduce__(self) -> tuple[Callable[..., Found], tuple[object, ...]]:
        found = self.discovery
        runs = [
            (
                str(run.path),
                run.relative,
                run.task_dir_name,
                run.predictions,
                run.left_out_folders,
                run.listing.digest if run.listing is not None else None,
                run.listing.newest_mtime_ns if run.listing is not None else 0,
            )
            for run in found.runs
        ]
        skipped = [(item.path, item.reason) for item in found.skipped]
        refused = [(item.path, item.reason) for item in found.refused]
        return _found, (runs, skipped, refused)


def _found(
    runs: list[_Run], skipped: list[tuple[str, str]], refused: list[tuple[str, str]]
) -> Found:
    """`Found.__reduce__`'s inverse: the models `discover` made in the child, made again from
    the values it took them from (constructed, not validated again: our own walk's values,
    and validating 2,000 runs, the first one building the model, took longer than the pipe)."""
    return Found(
        Discovery.model_construct(
            runs=[
                RunDirectory.model_construct(
                    path=Path(path),
                    relative=relative,
                    task_dir_name=task,
                    predictions=predictions,
                    left_out_folders=left_out,
                    listing=None
                    if digest is None
                    else Listing.model_construct(digest=digest, newest_mtime_ns=newest),
                    listed=True,
                )
                for path, relative, task, predictions, left_out, digest, newest in runs
            ],
            skipped=[Skipped.model_construct(path=path, reason=why) for path, why in skipped],
            refused=[Skipped.model_construct(path=path, reason=why) for path, why in refused],
        )
    )


AHEAD_MIN_CACHE_BYTES = 256 << 10
"""The size of the bundles folder's collect cache from which the runs are found ahead. The
cache holds an entry (about 1.2 KB) for each run collected, so it tells how large the tree was
last time before it is walked: a child costs about 15 ms (fork, pickling, exit) and saves the
parent up to the walk's time (about 75 us a run), so it pays for itself from about 200 runs."""


@contextmanager
def discovering_ahead(
    output_root: Path, bundles_dir: Path, meanwhile: Callable[[], None]
) -> Iterator[Callable[[], Found]]:
    """Start `discover(output_root)` and give a function that waits for its result: in a
    forked child where one may be forked and the tree was large last time (its collect cache
    in `bundles_dir` at least AHEAD_MIN_CACHE_BYTES), with `meanwhile` done here as it walks;
    else in line when asked for, with the same result, and `meanwhile` not done at all (work
    done early for nothing to overlap only moves: sync's upload loads the Hub client itself,
    into a process that a smaller fork left behind)."""

    def in_line() -> Found:
        return Found(discover(output_root))

    if _collect_cache_bytes(bundles_dir) < AHEAD_MIN_CACHE_BYTES or not can_fork():
        yield in_line
        return
    with ahead_in_child(lambda watch: in_line(), in_line) as found:
        meanwhile()
        yield found


def _collect_cache_bytes(bundles_dir: Path) -> int:
    try:
        return os.stat(bundles_dir / COLLECT_CACHE_NAME, follow_symlinks=False).st_size
    except OSError:
        return 0
