"""Benchmark: `bundler verify` against `zstd -dc BUNDLE | sha256sum` on the same bundle.

A script, not a test (pytest does not collect `benchmark_*.py`). It writes one run of --rows
predictions of about 4 KB each with the statics generator (`gen_statics.py --text-words 410`),
collects it once, then times the installed `bundler verify` console script and the
decompress-and-hash pipeline in alternating rounds (the order swaps every round, so neither
side always runs on a warmer cache), and prints the median of each side, the ratio of the
medians, the spread of the per-round ratios, and verify's peak RSS (read for that one process
with os.wait4). Targets: verify within 1.5x of the pipeline, peak RSS under 150 MB.

    .venv/bin/python tests/benchmark_verify.py --rows 20000 --rounds 7 --json-out verify.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BUNDLER = Path(sys.executable).parent / "bundler"
GENERATOR = Path("/work/shared/tools/gen_statics.py")
TEXT_WORDS = 410
"""Words of reasoning text per prediction: about 4 KB of JSON each."""
TARGET_RATIO = 1.5
TARGET_RSS_MIB = 150


@dataclass
class Measured:
    wall_s: float
    cpu_s: float
    """User and system time of the process and the children it waited for (a shell's
    pipeline): on a busy machine a steadier figure than the wall time."""
    peak_rss_kib: int


_LAUNCHER = """
import os, subprocess, sys, time
started = time.perf_counter()
process = subprocess.Popen(sys.argv[1:], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
_, status, usage = os.wait4(process.pid, 0)
elapsed = time.perf_counter() - started
cpu = usage.ru_utime + usage.ru_stime
print(os.waitstatus_to_exitcode(status), elapsed, cpu, usage.ru_maxrss)
"""


def run_measured(command: list[str]) -> Measured:
    """Wall time, CPU time and peak RSS of one child process, which must succeed.

    It is started by a small launcher of its own: Linux carries a process's peak RSS over to
    the children it forks, even across exec, so a child of this script (which has listed a
    100,000-file tree) would be charged with this script's size."""
    launched = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *command], capture_output=True, text=True, check=True
    )
    code, elapsed, cpu, rss = launched.stdout.split()
    if int(code) != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{launched.stderr}")
    return Measured(float(elapsed), float(cpu), int(rss))


def write_bundle(workdir: Path, rows: int, generator: Path) -> Path:
    """Generate one run of `rows` predictions, collect it, and return the archive."""
    root = workdir / f"tree-{rows}"
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    options = ["--tasks", "1", "--models", "1", "--rows", str(rows)]
    subprocess.run(
        [sys.executable, str(generator), str(root), *options, "--text-words", str(TEXT_WORDS)],
        check=True,
    )
    (task_dir,) = root.glob("*_predictions")
    task = task_dir.name.removesuffix("_predictions")
    size = sum(path.stat().st_size for path in root.rglob("*") if path.is_file())
    print(
        f"wrote {rows} predictions, {size / 1e6:.1f} MB, in {time.perf_counter() - started:.1f} s"
    )
    bundles = workdir / f"bundles-{rows}"
    shutil.rmtree(bundles, ignore_errors=True)
    collected = run_measured(
        [str(BUNDLER), "collect", str(root), "-o", str(bundles), "--expect", f"{task}={rows}"]
    )
    print(f"collected in {collected.wall_s:.1f} s")
    shutil.rmtree(root, ignore_errors=True)
    (archive,) = bundles.rglob("*.tar.zst")
    return archive


def time_verify(archive: Path) -> Measured:
    return run_measured([str(BUNDLER), "verify", str(archive)])


def time_pipeline(archive: Path) -> Measured:
    return run_measured(["bash", "-o", "pipefail", "-c", f"zstd -dc -q {archive} | sha256sum"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2000, help="predictions in the bundle")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each side")
    parser.add_argument("--generator", type=Path, default=GENERATOR, help="gen_statics.py")
    parser.add_argument("--workdir", type=Path, default=None, help="where to write (a tmp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the workdir afterwards")
    parser.add_argument("--json-out", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bundler-verify-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        archive = write_bundle(workdir, args.rows, args.generator)
        print(f"bundle {archive.stat().st_size / 1e6:.1f} MB; {os.cpu_count()} CPUs")
        rounds = []
        for number in range(1, args.rounds + 1):
            if number % 2:
                verify, pipeline = time_verify(archive), time_pipeline(archive)
            else:
                pipeline = time_pipeline(archive)
                verify = time_verify(archive)
            rounds.append(
                {
                    "verify_s": verify.wall_s,
                    "pipeline_s": pipeline.wall_s,
                    "ratio": verify.wall_s / pipeline.wall_s,
                    "verify_cpu_s": verify.cpu_s,
                    "pipeline_cpu_s": pipeline.cpu_s,
                    "verify_peak_rss_mib": verify.peak_rss_kib / 1024,
                }
            )
            print(
                f"round {number}: verify {verify.wall_s:.2f} s (CPU {verify.cpu_s:.2f} s, peak "
                f"RSS {verify.peak_rss_kib / 1024:.0f} MiB), zstd -dc | sha256sum "
                f"{pipeline.wall_s:.2f} s (CPU {pipeline.cpu_s:.2f} s), "
                f"ratio {rounds[-1]['ratio']:.2f}"
            )
        verify_median = statistics.median(r["verify_s"] for r in rounds)
        pipeline_median = statistics.median(r["pipeline_s"] for r in rounds)
        ratios = [r["ratio"] for r in rounds]
        ratio = verify_median / pipeline_median
        cpu_ratio = statistics.median(r["verify_cpu_s"] for r in rounds) / statistics.median(
            r["pipeline_cpu_s"] for r in rounds
        )
        peak_rss = max(r["verify_peak_rss_mib"] for r in rounds)
        print(
            f"median: verify {verify_median:.2f} s, zstd -dc | sha256sum {pipeline_median:.2f} s; "
            f"ratio of medians {ratio:.2f} (target <= {TARGET_RATIO}), per-round ratios "
            f"{min(ratios):.2f} to {max(ratios):.2f}; CPU-time ratio of medians {cpu_ratio:.2f}; "
            f"verify peak RSS {peak_rss:.0f} MiB (target < {TARGET_RSS_MIB})"
        )
        ok = ratio <= TARGET_RATIO and peak_rss < TARGET_RSS_MIB
        if args.json_out:
            args.json_out.write_text(
                json.dumps(
                    {
                        "rows": args.rows,
                        "bundle_bytes": archive.stat().st_size,
                        "cpus": os.cpu_count(),
                        "rounds": rounds,
                        "verify_median_s": verify_median,
                        "pipeline_median_s": pipeline_median,
                        "ratio_of_medians": ratio,
                        "ratio_spread": [min(ratios), max(ratios)],
                        "cpu_ratio_of_medians": cpu_ratio,
                        "verify_peak_rss_mib": peak_rss,
                        "targets": {"ratio": TARGET_RATIO, "peak_rss_mib": TARGET_RSS_MIB},
                        "targets_met": ok,
                    },
                    indent=2,
                )
                + "\n"
            )
        print("targets met" if ok else "TARGETS MISSED")
        return 0 if ok else 1
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
