"""Benchmark: `bundler verify` against `zstd -dc BUNDLE | sha256sum` on the same bundle.

A script, not a test (the suite runs it once at a tiny size as a smoke test). For each of
--rows and --large-rows it writes one run of predictions of about 4 KB each (the project's own
writer, or with --gen-statics PATH the statics generator `gen_statics.py --text-words 410`),
collects it once and signs a copy (`bundler sign`, a fresh ed25519 key), then for each of the
two alternates rounds of the installed `bundler verify` and the decompress-and-hash pipeline,
and prints both medians, the ratio of medians, the spread of per-round ratios and verify's peak
RSS. Targets: verify within 1.5x of the pipeline, signature included, peak RSS under 150 MB.

Each row also measures what reading ahead in a thread (bundler/local/readahead.py) gains: in
one process of the installed venv, `read_bundle` alternates with and without it, and the row's
`extra` gets the ratio of medians with/without, wall (`read_ahead`) and CPU (`read_ahead_cpu`),
and each round's wall ratio (a mechanism stays only while it pays for itself). The thread runs
on every "with" round, whatever the bundle's size, so that a bundle the bundler reads in line
(under READ_AHEAD_MIN_BYTES; `read_ahead_unused` in its `extra`) shows why: --read-ahead-rows
adds unsigned rows at sizes on either side of that threshold, to check where it stands. The
main thread's own CPU (`read_ahead_main_thread_cpu`) is what a second idle core would leave of
the wall time, a figure other jobs on the machine disturb less than the wall; so is the main
thread's wall less the time it waited for a core (`read_ahead_unqueued`, from Linux's schedstat):
its CPU plus its waits for the GIL and for chunks, what a quiet machine would leave of it (the
waits still hold what other jobs cost the producer, so it errs against the thread).

An unsigned bundle's row is followed by its floor (`verify-ROWS-floor`, FLOOR_SCRIPT): the same
pipeline run from an interpreter that has first loaded the libraries `bundler verify` cannot do
without (typer and rich for the command line, pydantic for its models, zstandard), as the
console script runs. What the bundler's own reading adds shows against it; what loading Python
and those libraries costs, between it and the pipeline.

    .venv/bin/python tests/benchmark_verify.py --rounds 7 --json-out /tmp/verify.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from benchlib import (
    BUNDLER,
    FLOOR_PRELUDE,
    GEN_STATICS_HELP,
    INSTALLED,
    TASK,
    Comparison,
    Measured,
    add_mechanism_rounds,
    alternate,
    compile_bytecode,
    machine,
    report_figures,
    rounds_of_mechanisms,
    run_measured,
    with_and_without,
    write_realistic,
)

TARGET_RATIO = 1.5
READ_AHEAD_SCRIPT = """
import json, sys, time
from pathlib import Path
from bundler.local import readahead
from bundler.local.verify import read_bundle

path, rounds = Path(sys.argv[1]), int(sys.argv[2])
unused = path.stat().st_size < readahead.READ_AHEAD_MIN_BYTES


def queued():  # seconds this thread has waited for a core (Linux); 0 elsewhere
    try:
        with open("/proc/thread-self/schedstat") as stats:
            return int(stats.read().split()[1]) / 1e9
    except OSError:
        return 0.0


read_bundle(path)  # imports and the page cache, before anything is timed
figures = {"with": [], "without": []}
for number in range(rounds):
    for ahead in (True, False) if number % 2 == 0 else (False, True):
        readahead.READ_AHEAD_MIN_BYTES = 0 if ahead else sys.maxsize
        started, cpu, own, waited = (
            time.perf_counter(), time.process_time(), time.thread_time(), queued()
        )
        if not read_bundle(path).verification().ok:
            raise SystemExit(f"{path} does not verify")
        wall = time.perf_counter() - started
        seconds = (
            wall, time.process_time() - cpu, time.thread_time() - own, wall - (queued() - waited)
        )
        figures["with" if ahead else "without"].append(seconds)
print(json.dumps({"figures": figures, "unused": unused}))
"""


def write_bundle(workdir: Path, rows: int, gen_statics: Path | None) -> Path:
    """Generate one run of `rows` predictions, collect it, and return the archive."""
    root = workdir / f"tree-{rows}"
    shutil.rmtree(root, ignore_errors=True)
    write_realistic(root, rows, gen_statics)
    bundles = workdir / f"bundles-{rows}"
    shutil.rmtree(bundles, ignore_errors=True)
    run_measured(
        [str(BUNDLER), "collect", str(root), "-o", str(bundles), f"--expect={TASK}={rows}"]
    )
    shutil.rmtree(root, ignore_errors=True)
    (archive,) = bundles.rglob("*.tar.zst")
    return archive


def signed_copy(workdir: Path, archive: Path, rows: int) -> Path:
    """A copy of the bundle, signed as `bundler sign` signs it, by a fresh ed25519 key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = workdir / "bench-key"
    key.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    key.chmod(0o600)
    signed = workdir / f"signed-{rows}" / archive.parent.name
    shutil.rmtree(signed.parent, ignore_errors=True)
    shutil.copytree(archive.parent, signed)
    if run_measured([str(BUNDLER), "sign", str(signed), "--key", str(key)]).exit_code != 0:
        raise SystemExit(f"bundler sign of {signed} failed")
    return signed / archive.name


def verify_row(
    name: str, archive: Path, rounds: int, mechanism_rounds: int, goal: float | None = TARGET_RATIO
) -> Comparison:
    """`bundler verify` of `archive` against the pipeline, alternated, and what reading ahead
    gains on it; `goal` None for a size measured only to place the read-ahead's threshold."""

    def pipeline() -> float:
        return run_measured(["bash", "-o", "pipefail", "-c", _pipeline(archive)]).seconds

    comparison = Comparison(name, "bundler verify", "zstd -dc | sha256sum", target_ratio=goal)
    comparison.extra["bundle_mb"] = round(archive.stat().st_size / 1e6, 1)
    alternate(comparison, rounds, lambda: _verified(archive), pipeline)
    comparison.extra.update(read_ahead_gain(archive, mechanism_rounds))
    print(f"  {name} read ahead / in line: {comparison.extra}", flush=True)
    return comparison


FLOOR_SCRIPT = f"""{FLOOR_PRELUDE}
import subprocess, sys
import typer, pydantic.main, rich.console, zstandard
sys.exit(subprocess.run(["bash", "-o", "pipefail", "-c", sys.argv[1]]).returncode)
"""
"""`zstd -dc | sha256sum` (argv[1], a shell pipeline) from an interpreter with the libraries
`bundler verify` loads, set up as the console script sets itself up (FLOOR_PRELUDE): the least
a verifier in Python must load. The reading itself stays at the speed of the C tools and
in two processes, and no member is parsed, so the floor errs low."""


def floor_row(name: str, archive: Path, rounds: int) -> Comparison:
    """`bundler verify` of `archive` against FLOOR_SCRIPT's pipeline of it, alternated."""

    def floor() -> float:
        script = [str(INSTALLED / "python"), "-P", "-c", FLOOR_SCRIPT, _pipeline(archive)]
        measured = run_measured(script)
        if measured.exit_code != 0:
            raise SystemExit(f"the floor's pipeline of {archive} exited {measured.exit_code}")
        return measured.seconds

    comparison = Comparison(
        f"{name}-floor", "bundler verify", "the pipeline, the bundler's libraries loaded"
    )
    comparison.extra["bundle_mb"] = round(archive.stat().st_size / 1e6, 1)
    return alternate(comparison, rounds, lambda: _verified(archive), floor)


def _pipeline(archive: Path) -> str:
    """The yardstick: decompress the bundle and hash the tar, as a shell pipeline."""
    return f"zstd -dc -q {archive} | sha256sum"


def _verified(archive: Path) -> Measured:
    measured = run_measured([str(BUNDLER), "verify", str(archive)])
    if measured.exit_code != 0:
        raise SystemExit(f"verify of {archive} exited {measured.exit_code}")
    return measured


def read_ahead_gain(archive: Path, rounds: int) -> dict[str, object]:
    """`read_bundle` with and without the read-ahead thread, alternated in one process of the
    installed venv: medians' ratios with/without, wall and CPU, each round's wall ratio, and
    whether the bundler reads `archive` in line; nothing for an install without the thread."""
    measured = run_measured(  # -P: the installed bundler, never the one in the working folder
        [str(INSTALLED / "python"), "-P", "-c", READ_AHEAD_SCRIPT, str(archive), str(rounds)],
        capture=True,
    )
    if measured.exit_code != 0:  # an install from before the read-ahead thread
        return {}
    reported = json.loads(measured.stdout)
    ahead, inline = reported["figures"]["with"], reported["figures"]["without"]

    def median(pairs: list[list[float]], which: int) -> float:
        return statistics.median(pair[which] for pair in pairs)

    wall = with_and_without("read_ahead", [a[0] for a in ahead], [b[0] for b in inline])
    return wall | {
        "read_ahead_cpu": round(median(ahead, 1) / median(inline, 1), 3),
        "read_ahead_main_thread_cpu": round(median(ahead, 2) / median(inline, 2), 3),
        "read_ahead_unqueued": round(median(ahead, 3) / median(inline, 3), 3),
        "in_line_s": round(median(inline, 0), 3),
        "read_ahead_s": round(median(ahead, 0), 3),
        "read_ahead_unused": reported["unused"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternated rounds per row")
    parser.add_argument("--rows", type=int, default=20_000, help="predictions in the bundle")
    parser.add_argument("--large-rows", type=int, default=100_000, help="0 skips the large run")
    parser.add_argument(
        "--read-ahead-rows",
        type=int,
        nargs="*",
        default=[],
        help="more sizes, measured unsigned, without a floor or a goal, on either side of the "
        "read-ahead's threshold",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="where to write (a tmp dir)")
    parser.add_argument("--json-out", type=Path, default=None, help="write the figures as JSON")
    parser.add_argument("--gen-statics", type=Path, default=None, help=GEN_STATICS_HELP)
    add_mechanism_rounds(parser)
    args = parser.parse_args()
    mechanism_rounds = rounds_of_mechanisms(args)

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bundler-verify-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}", flush=True)
    compile_bytecode()
    comparisons = []
    try:
        measured_in_full = {args.rows, args.large_rows}
        for rows in sorted({*measured_in_full, *args.read_ahead_rows} - {0}):
            archive = write_bundle(workdir, rows, args.gen_statics)
            goal = TARGET_RATIO if rows in measured_in_full else None
            comparisons.append(
                verify_row(f"verify-{rows}", archive, args.rounds, mechanism_rounds, goal)
            )
            if rows in measured_in_full:
                comparisons.append(floor_row(f"verify-{rows}", archive, args.rounds))
                signed = signed_copy(workdir, archive, rows)
                comparisons.append(
                    verify_row(f"verify-signed-{rows}", signed, args.rounds, mechanism_rounds)
                )
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    report_figures(args.json_out, comparisons)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
