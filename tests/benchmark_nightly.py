"""Benchmark: the nightly run when nothing changed, at --large runs against --small runs.

A script, not a test (the suite runs it once with --smoke). It writes two trees of runs with
the project's own writer (tests/factory.py), --small and --large runs of --rows predictions
each, runs `bundler collect` on each once (which writes the bundles and the stat cache), then
alternates rounds of
- `bundler collect` again with nothing changed (the no-op: every run skipped unread), at
  --large runs against the same at --small runs (goal: at most 1.5x), and
- upload's local part with nothing changed (`gather_local`, which verifies the bundles unless
  the verification cache vouches for them, in a child process like the command's), likewise,
- the whole nightly command with nothing changed, `bundler sync` against the local Hub server
  (each tree's bundles already published there, in a repository of their own; sync then
  collects nothing, verifies nothing and uploads nothing), likewise: the goal of issue 16;
  then the same sync with and without each of its mechanisms (benchlib.mechanism_gain, each
  with/without in the row's extra): its runs found ahead in a forked child while the Hub
  client loads (`discover_ahead_*`, at each size); and at --large runs, where the sync reads
  the table index, the console script's collector settings (`gc_settings`), Arrow's
  allocations from the C library's heap (`arrow_heap`, a gain in peak RSS) and, where the
  installed venv has pandas, pandas left out (`pandas_left_out`),
printing both medians, the ratio of medians, the spread of per-round ratios and peak RSS. With
--full-rounds N it also times `collect --full` (everything read again) at --large runs against
the no-op, N rounds: what the cache saves.

Each no-op row also carries its floor per run added (`floor_seconds_per_added_run`, one figure a
round): FLOOR_SCRIPT lstat's every entry of the runs' tree and of the bundles folder, at --large
and at --small runs alternated, and the growth between the two, divided by the runs added, is the
least a no-op must spend on each run to know that nothing changed (upload's check, which walks
no runs, has the bundles folder's alone). docs/performance.md sets the bundler's growth per run
beside it: a figure that, unlike the ratio of two sizes, no saving on fixed costs can worsen.

    .venv/bin/python tests/benchmark_nightly.py --rounds 7 --json-out /tmp/nightly.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from benchlib import (
    ARROW_POOL_KEPT,
    BUNDLER,
    DEFAULT_GC,
    INSTALLED,
    PANDAS_LET_IN,
    Comparison,
    Measured,
    add_mechanism_rounds,
    alternate,
    compile_bytecode,
    machine,
    mechanism_gain,
    pandas_installed,
    report_figures,
    rounds_of_mechanisms,
    run_measured,
    tree_bytes,
)
from factory import RunSpec, write_tree
from hubserver import HubServer, TokenInfo, client_env
from scalelib import publish_directly

TASK = "expert-vqa"
TARGET_RATIO = 1.5
TOKEN = "hf_BenchmarkWriteToken0123456789abcdef"
GATHER = """
import sys
from pathlib import Path
from bundler.core.progress import NoProgress
from bundler.hub.publish.upload import gather_local
local, set_aside = gather_local(Path(sys.argv[1]), allow_partial=False, progress=NoProgress())
sys.exit(0 if len(local) == int(sys.argv[2]) and not set_aside else 1)
"""


FLOOR_SCRIPT = """
import json, os, sys, time
def lstat_below(top):
    pending = [top]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                else:
                    entry.stat(follow_symlinks=False)
seconds = {}
for name, top in (("runs", sys.argv[1]), ("bundles", sys.argv[2])):
    started = time.perf_counter()
    lstat_below(top)
    seconds[name] = time.perf_counter() - started
print(json.dumps(seconds))
"""
"""The least a no-op nightly must do with the runs' tree and the bundles folder, in a few lines
of Python: lstat every entry (a file whose size, mtime, ctime and inode are unchanged is trusted
unchanged, as the stat caches trust it). It reads no cache and checks nothing, so it errs low;
it is timed inside its process, as only its growth with the tree is wanted."""


def build(workdir: Path, runs: int, rows: int) -> tuple[Path, Path]:
    """A tree of `runs` runs, collected once: the state a nightly run finds."""
    root, bundles = workdir / f"output-{runs}", workdir / f"bundles-{runs}"
    started = time.perf_counter()
    specs = [RunSpec(model=f"bench/model-{number}", rows=rows) for number in range(runs)]
    write_tree(root, specs, how_do_you=False)
    written = time.perf_counter() - started
    first = run_measured(collect_command(root, bundles, rows))
    if first.exit_code != 0:
        raise SystemExit(f"the first collect of {runs} runs exited {first.exit_code}")
    gathered = run_measured(gather_command(bundles, runs))  # verifies all, fills its cache
    if gathered.exit_code != 0:
        raise SystemExit(f"the first gather of {runs} bundles exited {gathered.exit_code}")
    print(
        f"{runs} runs x {rows} predictions: {tree_bytes(root) / 1e6:.1f} MB written in "
        f"{written:.1f} s; first collect {first.seconds:.2f} s, first verification "
        f"{gathered.seconds:.2f} s",
        flush=True,
    )
    time.sleep(0.05)  # the caches' own racy window (a file as new as the cache) has passed
    return root, bundles


def collect_command(root: Path, bundles: Path, rows: int) -> list[str]:
    return [str(BUNDLER), "collect", str(root), "-o", str(bundles), "--expect", f"{TASK}={rows}"]


def gather_command(bundles: Path, runs: int) -> list[str]:
    """Upload's gather in the venv measured (BENCH_BIN's, as every other row), not the one
    running this script: `-P` keeps the script's folder from shadowing the installed package."""
    return [str(INSTALLED / "python"), "-P", "-c", GATHER, str(bundles), str(runs)]


def sync_command(root: Path, bundles: Path, rows: int, repo_id: str) -> list[str]:
    sync = [str(BUNDLER), "sync", str(root), "-o", str(bundles), "--repo", repo_id]
    return [*sync, "--expect", f"{TASK}={rows}"]


def checked(
    command: list[str], env: dict[str, str] | None = None, *, capture: bool = False
) -> Measured:
    measured = run_measured(command, env=env, capture=capture)
    if measured.exit_code != 0:
        raise SystemExit(f"{' '.join(command)} exited {measured.exit_code}")
    return measured


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="alternated rounds per row")
    parser.add_argument("--small", type=int, default=50, help="runs in the small tree")
    parser.add_argument("--large", type=int, default=2000, help="runs in the large tree")
    parser.add_argument("--rows", type=int, default=20, help="predictions per run")
    parser.add_argument("--full-rounds", type=int, default=0, help="also time collect --full")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one round")
    parser.add_argument("--workdir", type=Path, default=None, help="where to write (a tmp dir)")
    parser.add_argument("--json-out", type=Path, default=None, help="write the figures as JSON")
    add_mechanism_rounds(parser)
    args = parser.parse_args()
    if args.smoke:
        args.rounds, args.mechanism_rounds, args.small, args.large, args.rows = 1, 1, 2, 4, 3
        args.full_rounds = min(args.full_rounds, 1)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bundler-bench-nightly-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}", flush=True)
    compile_bytecode()
    comparisons: list[Comparison] = []
    try:
        small_root, small_bundles = build(workdir, args.small, args.rows)
        large_root, large_bundles = build(workdir, args.large, args.rows)
        large, small = f"R={args.large}", f"R={args.small}"
        noop = Comparison(
            "noop-collect", f"collect no-op {large}", f"collect no-op {small}", TARGET_RATIO
        )
        comparisons.append(
            alternate(
                noop,
                args.rounds,
                lambda: checked(collect_command(large_root, large_bundles, args.rows)),
                lambda: checked(collect_command(small_root, small_bundles, args.rows)).seconds,
            )
        )
        gather = Comparison(
            "noop-gather", f"upload's gather {large}", f"upload's gather {small}", TARGET_RATIO
        )
        comparisons.append(
            alternate(
                gather,
                args.rounds,
                lambda: checked(gather_command(large_bundles, args.large)),
                lambda: checked(gather_command(small_bundles, args.small)).seconds,
            )
        )
        if args.full_rounds:
            full = Comparison("full-collect", f"collect --full {large}", f"collect no-op {large}")
            comparisons.append(
                alternate(
                    full,
                    args.full_rounds,
                    lambda: checked(
                        [*collect_command(large_root, large_bundles, args.rows), "--full"]
                    ),
                    lambda: checked(collect_command(large_root, large_bundles, args.rows)).seconds,
                )
            )
        comparisons.append(
            sync_row(args, workdir, (small_root, small_bundles), (large_root, large_bundles))
        )
        floors = floor_per_added_run(
            args.rounds,
            args.large - args.small,
            (small_root, small_bundles),
            (large_root, large_bundles),
        )
        for comparison in comparisons:
            comparison.extra["rows_per_run"] = args.rows
            if comparison.name.startswith("noop-"):
                walks = ("bundles",) if comparison.name == "noop-gather" else ("runs", "bundles")
                comparison.extra["floor_seconds_per_added_run"] = [
                    round(sum(each[walk] for walk in walks), 9) for each in floors
                ]
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    report_figures(args.json_out, comparisons)
    return 0


def sync_row(
    args: argparse.Namespace,
    workdir: Path,
    small: tuple[Path, Path],
    large: tuple[Path, Path],
) -> Comparison:
    """`bundler sync` with nothing changed, at --large runs against --small runs, each tree's
    bundles already published (as the bundler's uploads leave a repository)."""
    hub = HubServer(tokens={TOKEN: TokenInfo(name="bench", role="write", orgs=("bench",))})
    hub.start()
    try:
        env = os.environ | client_env(hub, TOKEN, hf_home=str(workdir / "hf-home"))
        commands = {}
        for label, (root, bundles) in (("small", small), ("large", large)):
            repo_id = f"bench/nightly-{label}"
            publish_directly(hub, repo_id, bundles)
            commands[label] = sync_command(root, bundles, args.rows, repo_id)
            checked(commands[label], env)  # the first sync fills nothing new: a no-op already
        comparison = Comparison(
            "noop-sync",
            f"sync no-op R={args.large}",
            f"sync no-op R={args.small}",
            TARGET_RATIO,
        )
        hub.reset_requests()
        alternate(
            comparison,
            args.rounds,
            lambda: checked(commands["large"], env),
            lambda: checked(commands["small"], env).seconds,
        )
        counts = {
            label: hub.request_counts(f"bench/nightly-{label}") for label in ("small", "large")
        }
        comparison.extra["hub_requests_per_sync"] = {
            label: (count["api"] + count["file"]) / args.rounds for label, count in counts.items()
        }
        for label in ("large", "small"):
            comparison.extra.update(
                mechanism_gain(
                    f"discover_ahead_{label}",
                    lambda label=label: commands[label][1:],
                    INLINE_DISCOVERY,
                    rounds_of_mechanisms(args),
                    env,
                )
            )
        undoing = {"gc_settings": DEFAULT_GC, "arrow_heap": ARROW_POOL_KEPT}
        if pandas_installed():
            undoing["pandas_left_out"] = PANDAS_LET_IN
        for mechanism, undo in undoing.items():
            comparison.extra.update(
                mechanism_gain(
                    mechanism,
                    lambda: commands["large"][1:],
                    undo,
                    rounds_of_mechanisms(args),
                    env,
                )
            )
        return comparison
    finally:
        hub.stop()


def floor_per_added_run(
    rounds: int, added: int, small: tuple[Path, Path], large: tuple[Path, Path]
) -> list[dict[str, float]]:
    """FLOOR_SCRIPT at --large and at --small runs, `rounds` times (swapping which goes first):
    each round's growth in seconds per run added, for the runs' tree and the bundles folder."""

    def walked(trees: tuple[Path, Path]) -> dict[str, float]:
        command = [str(INSTALLED / "python"), "-P", "-c", FLOOR_SCRIPT, *map(str, trees)]
        seconds: dict[str, float] = json.loads(checked(command, capture=True).stdout)
        return seconds

    floors = []
    for number in range(rounds):
        if number % 2 == 0:
            at_large, at_small = walked(large), walked(small)
        else:
            at_small, at_large = walked(small), walked(large)
        floors.append({walk: (at_large[walk] - at_small[walk]) / added for walk in at_large})
    print(f"  floor per run added: {floors}", flush=True)
    return floors


INLINE_DISCOVERY = """
import contextlib
import bundler.sync as sync
from bundler.local.discover import discover
from bundler.local.discoverahead import Found
sync.discovering_ahead = lambda root, *_: contextlib.nullcontext(lambda: Found(discover(root)))
"""
"""Without discovering ahead (bundler/local/discoverahead.py), as before it: the runs found in
line, the Hub client loaded by the upload."""


if __name__ == "__main__":
    raise SystemExit(main())
