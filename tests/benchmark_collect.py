"""Benchmark: `bundler collect` against `tar -cf - DIR | zstd -3 -T0` on the same run.

A script, not a test (pytest does not collect `benchmark_*.py`). It writes a run of --rows
predictions of about 4 KB each (20,000 rows is about 80 MB of JSON), times the installed
`bundler collect` console script and the tar|zstd pipeline over --rounds rounds, and prints the
median of each, the median ratio, and the bundler's peak RSS (read for that one process with
os.wait4). Then it writes a --memory-rows run (100,000 by default) and measures the peak RSS of
one collect of it. Targets: collect within 2x tar|zstd, peak RSS under 150 MB at both sizes.

    .venv/bin/python tests/benchmark_collect.py --rounds 5 --rows 20000 --workdir /tmp/bench
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from factory import RunSpec, write_run

BUNDLER = Path(sys.executable).parent / "bundler"
TASK = "expert-vqa"
TARGET_RATIO = 2.0
TARGET_RSS_MIB = 150
PREDICTION_BYTES = 4096


def corpus(seed: int = 11, size: int = 4 << 20) -> str:
    """Text that compresses roughly like model reasoning does (a large vocabulary, not noise),
    made once so writing 100,000 predictions takes seconds, not minutes."""
    rng = random.Random(seed)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    weights = [len(letters) - i for i in range(len(letters))]
    vocabulary = ["".join(rng.choices(letters, weights, k=rng.randint(2, 10))) for _ in range(6000)]
    words: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(vocabulary)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


def write_benchmark_run(root: Path, rows: int) -> Path:
    """One run with `rows` predictions of about PREDICTION_BYTES each."""
    spec = RunSpec(task=TASK, model="bench/model-1", rows=0, thoughts_chars=0)
    run_dir = write_run(root, spec)
    text = corpus()
    rng = random.Random(3)
    record_rng = random.Random(5)
    base = len(json.dumps(spec.prediction(0, record_rng)))
    thoughts_length = PREDICTION_BYTES - base
    for index in range(rows):
        record = spec.prediction(index, record_rng)
        start = rng.randrange(0, len(text) - thoughts_length)
        record["thoughts"] = text[start : start + thoughts_length]
        (run_dir / f"prediction_{index}.json").write_text(json.dumps(record))
    metrics = spec.default_metrics() | {"exact_match": {"accuracy": 0.5, "n": rows}}
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    return run_dir


def tree_bytes(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())


def run_measured(command: list[str]) -> tuple[float, int, int]:
    """Wall time, exit code and peak RSS (KiB) of one child process."""
    started = time.perf_counter()
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    elapsed = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode() if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({process.returncode}):\n{stderr}")
    return elapsed, process.returncode, usage.ru_maxrss


def time_collect(root: Path, out: Path, rows: int) -> tuple[float, int]:
    shutil.rmtree(out, ignore_errors=True)
    elapsed, _, rss = run_measured(
        [str(BUNDLER), "collect", str(root), "-o", str(out), "--expect", f"{TASK}={rows}"]
    )
    return elapsed, rss


def time_tar_zstd(root: Path, out: Path) -> float:
    out.unlink(missing_ok=True)
    script = f"tar -cf - -C {root} . | zstd -3 -T0 -q -o {out}"
    elapsed, _, _ = run_measured(["bash", "-o", "pipefail", "-c", script])
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000, help="rows in the timed run")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds of each")
    parser.add_argument(
        "--memory-rows", type=int, default=100_000, help="rows in the memory run (0 skips it)"
    )
    parser.add_argument("--workdir", type=Path, default=None, help="where to write (a tmp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the workdir afterwards")
    args = parser.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bundler-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        root = workdir / f"out-{args.rows}"
        shutil.rmtree(root, ignore_errors=True)
        started = time.perf_counter()
        write_benchmark_run(root, args.rows)
        size = tree_bytes(root)
        print(
            f"wrote {args.rows} predictions, {size / 1e6:.1f} MB, "
            f"in {time.perf_counter() - started:.1f} s; {os.cpu_count()} CPUs"
        )
        collect_times: list[float] = []
        tar_times: list[float] = []
        ratios: list[float] = []
        peak_rss = 0
        for round_number in range(1, args.rounds + 1):
            collect_time, rss = time_collect(root, workdir / "bundles", args.rows)
            tar_time = time_tar_zstd(root, workdir / "tar.tar.zst")
            collect_times.append(collect_time)
            tar_times.append(tar_time)
            ratios.append(collect_time / tar_time)
            peak_rss = max(peak_rss, rss)
            print(
                f"round {round_number}: collect {collect_time:.2f} s "
                f"(peak RSS {rss / 1024:.0f} MiB), tar|zstd {tar_time:.2f} s, "
                f"ratio {collect_time / tar_time:.2f}"
            )
        archive = next((workdir / "bundles").rglob("*.tar.zst"))
        tar_size = (workdir / "tar.tar.zst").stat().st_size
        print(
            f"median: collect {statistics.median(collect_times):.2f} s, "
            f"tar|zstd {statistics.median(tar_times):.2f} s, "
            f"ratio {statistics.median(ratios):.2f} (target <= {TARGET_RATIO}); "
            f"collect peak RSS {peak_rss / 1024:.0f} MiB (target < {TARGET_RSS_MIB}); "
            f"bundle {archive.stat().st_size / 1e6:.1f} MB vs tar.zst {tar_size / 1e6:.1f} MB"
        )
        ok = statistics.median(ratios) <= TARGET_RATIO and peak_rss / 1024 < TARGET_RSS_MIB
        shutil.rmtree(root, ignore_errors=True)

        if args.memory_rows:
            root = workdir / f"out-{args.memory_rows}"
            shutil.rmtree(root, ignore_errors=True)
            started = time.perf_counter()
            write_benchmark_run(root, args.memory_rows)
            size = tree_bytes(root)
            print(
                f"wrote {args.memory_rows} predictions, {size / 1e6:.1f} MB, "
                f"in {time.perf_counter() - started:.1f} s"
            )
            collect_time, rss = time_collect(root, workdir / "bundles-memory", args.memory_rows)
            tar_time = time_tar_zstd(root, workdir / "tar-memory.tar.zst")
            print(
                f"memory run: collect {collect_time:.2f} s, peak RSS {rss / 1024:.0f} MiB "
                f"(target < {TARGET_RSS_MIB}); tar|zstd {tar_time:.2f} s, "
                f"ratio {collect_time / tar_time:.2f}"
            )
            ok = ok and rss / 1024 < TARGET_RSS_MIB
            shutil.rmtree(root, ignore_errors=True)
        print("targets met" if ok else "TARGETS MISSED")
        return 0 if ok else 1
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
