"""docs/performance.md in one command: run every benchmark script under tests/ with
`--json-out` into one folder, then render the page from it (tests/performance_figures.py).

    .venv/bin/python tests/performance_page.py --gen-statics PATH/gen_statics.py
    .venv/bin/python tests/performance_page.py --sizes quick --note "Provisional: ..."
    .venv/bin/python tests/performance_page.py --only verify --gen-statics PATH  # one again
    .venv/bin/python tests/performance_page.py --from-json docs/performance     # render only

The figures stay beside the page (docs/performance/: each benchmark's JSON and run.json, how
and when each ran and the load it saw), so the page can be rendered again without measuring,
and tests/test_performance_page.py checks the page against them. `--only` measures some
benchmarks again and keeps the others' saved figures. A script that is absent, or fails, is
named on the page as not measured, and the command exits 1 after rendering what it has.
Sizes: `full` (the issue's), `quick` (minutes, for a busy machine) or `smoke` (seconds, the
test suite's tiny sizes: how tests/fixtures/performance/ was made).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from performance_figures import FIGURES, RUN_LOG, FiguresError, RunLog, RunRecord, load, render

TESTS = Path(__file__).parent
DOC = TESTS.parent / "docs" / "performance.md"
FOLDER = TESTS.parent / "docs" / "performance"
SIZES = ("full", "quick", "smoke")
MECHANISM_ROUNDS = {"full": 25, "quick": 5, "smoke": 1}
"""The --mechanism-rounds of each of SIZES, for a benchmark that measures mechanisms: a gain of
a few percent shows beyond this machine's noise only over more rounds than a ratio against a
yardstick needs (five rounds can show one only if the mechanism wins all five)."""


@dataclass(frozen=True)
class Benchmark:
    name: str
    """Its figures' file is NAME.json (performance_figures.FIGURES gives their shape)."""
    script: str
    sizes: dict[str, list[str]]
    """Its size arguments for each of SIZES."""
    rounds: dict[str, int] | None
    """Its --rounds for each of SIZES; None for a script without rounds."""
    takes_gen_statics: bool = False
    measures_mechanisms: bool = False
    """Whether it takes --mechanism-rounds (MECHANISM_ROUNDS)."""


BENCHMARKS = [
    Benchmark(
        "startup",
        "benchmark_startup.py",
        {"full": [], "quick": [], "smoke": []},
        {"full": 15, "quick": 5, "smoke": 1},
    ),
    Benchmark(
        "collect",
        "benchmark_collect.py",
        {
            "full": ["--rows", "20000", "--large-rows", "100000", "--runs", "500"],
            "quick": ["--rows", "2000", "--large-rows", "10000", "--runs", "100"],
            "smoke": ["--rows", "60", "--large-rows", "80", "--runs", "3", "--run-rows", "4"],
        },
        {"full": 7, "quick": 3, "smoke": 1},
        takes_gen_statics=True,
        measures_mechanisms=True,
    ),
    Benchmark(
        "verify",
        "benchmark_verify.py",
        {
            "full": [
                "--rows",
                "20000",
                "--read-ahead-rows",
                "200",
                "500",
                "--large-rows",
                "100000",
            ],
            "quick": ["--rows", "2000", "--large-rows", "10000"],
            "smoke": ["--rows", "40", "--read-ahead-rows", "50", "--large-rows", "60"],
        },
        {"full": 7, "quick": 3, "smoke": 1},
        takes_gen_statics=True,
        measures_mechanisms=True,
    ),
    Benchmark(
        "upload",
        "benchmark_upload.py",
        {
            "full": ["--bundles", "50"],
            "quick": ["--bundles", "20"],
            "smoke": ["--bundles", "3", "--rows", "5"],
        },
        {"full": 5, "quick": 3, "smoke": 1},
        measures_mechanisms=True,
    ),
    Benchmark(
        "nightly",
        "benchmark_nightly.py",
        {
            "full": ["--small", "50", "--large", "2000", "--full-rounds", "3"],
            "quick": ["--small", "50", "--large", "500", "--full-rounds", "1"],
            "smoke": ["--small", "2", "--large", "4", "--rows", "3", "--full-rounds", "1"],
        },
        {"full": 9, "quick": 3, "smoke": 1},
        measures_mechanisms=True,
    ),
    Benchmark(
        "scale",
        "benchmark_scale.py",
        {
            "full": ["--sizes", "300", "3000", "30000", "--bulk", "100"],
            "quick": ["--sizes", "100", "1000", "--bulk", "20"],
            "smoke": ["--sizes", "10", "20", "--bulk", "3"],
        },
        {"full": 3, "quick": 1, "smoke": 1},
    ),
    Benchmark(
        "audit",
        "benchmark_audit.py",
        {"full": ["--size", "100"], "quick": ["--size", "50"], "smoke": ["--size", "5"]},
        None,
    ),
    Benchmark(
        "charts",
        "benchmark_charts.py",
        {
            "full": [],
            "quick": ["--charts", "5"],
            "smoke": ["--charts", "2", "--entries", "30"],
        },
        {"full": 5, "quick": 3, "smoke": 1},
    ),
]
assert [benchmark.name for benchmark in BENCHMARKS] == list(FIGURES)


def arguments(benchmark: Benchmark, sizes: str, rounds: int | None, gen: Path | None) -> list[str]:
    """The script's arguments but --json-out: what the page shows as its command."""
    chosen = [*benchmark.sizes[sizes]]
    if benchmark.rounds is not None:
        chosen += ["--rounds", str(rounds or benchmark.rounds[sizes])]
    if benchmark.measures_mechanisms and rounds is None:  # --rounds is every benchmark's rounds
        chosen += ["--mechanism-rounds", str(MECHANISM_ROUNDS[sizes])]
    if benchmark.takes_gen_statics and gen is not None:
        chosen += ["--gen-statics", str(gen)]
    return chosen


def measure(
    benchmark: Benchmark, folder: Path, sizes: str, rounds: int | None, gen: Path | None
) -> RunRecord:
    """Run one benchmark script into `folder`, its progress on this command's output."""
    shown = [f"tests/{benchmark.script}", *arguments(benchmark, sizes, rounds, gen)]
    out = folder / f"{benchmark.name}.json"
    out.unlink(missing_ok=True)
    script = TESTS / benchmark.script
    if not script.is_file():
        return RunRecord(
            benchmark=benchmark.name,
            command=shown,
            sizes=sizes,
            not_measured=f"tests/{benchmark.script} is absent",
        )
    print(f"\n== {' '.join(shown)}", flush=True)
    started, load_before, clock = datetime.now(UTC), os.getloadavg()[0], time.perf_counter()
    command = [sys.executable, str(script), *shown[1:], "--json-out", str(out)]
    code = subprocess.run(command, cwd=TESTS.parent, check=False).returncode
    failed = None
    if code != 0 or not out.is_file():
        failed = f"`{' '.join(shown)}` exited {code}" + ("" if out.is_file() else ", no JSON")
        out.unlink(missing_ok=True)
    return RunRecord(
        benchmark=benchmark.name,
        command=shown,
        sizes=sizes,
        started=started,
        seconds=round(time.perf_counter() - clock, 1),
        load_before=load_before,
        load_after=os.getloadavg()[0],
        not_measured=failed,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", choices=SIZES, default="full", help="the benchmarks' sizes")
    parser.add_argument("--rounds", type=int, default=None, help="rounds of every benchmark")
    parser.add_argument(
        "--only", action="append", choices=list(FIGURES), help="measure only these (repeatable)"
    )
    parser.add_argument("--gen-statics", type=Path, default=None, help="gen_statics.py's path")
    parser.add_argument(
        "--note", default=None, help="a line said at the top of the page (kept by --only)"
    )
    parser.add_argument(
        "--from-json",
        type=Path,
        default=None,
        metavar="DIR",
        help="render the page from the figures saved in DIR, measuring nothing",
    )
    parser.add_argument("--json-dir", type=Path, default=FOLDER, help="where figures are saved")
    parser.add_argument("--out", type=Path, default=DOC, help="the page to write")
    args = parser.parse_args()

    folder = args.from_json or args.json_dir
    failed = False
    if args.from_json is None:
        folder.mkdir(parents=True, exist_ok=True)
        kept = load(folder)[0] if args.only else RunLog(runs=[])
        records = {run.benchmark: run for run in kept.runs}
        for benchmark in BENCHMARKS:
            if args.only and benchmark.name not in args.only:
                continue
            record = measure(benchmark, folder, args.sizes, args.rounds, args.gen_statics)
            records[benchmark.name] = record
            failed = failed or (record.not_measured is not None and record.started is not None)
        note = args.note if args.note is not None else kept.note
        log = RunLog(note=note, runs=[records[name] for name in FIGURES if name in records])
        (folder / RUN_LOG).write_text(log.model_dump_json(indent=2) + "\n", encoding="utf-8")
    try:
        page = render(folder)
    except FiguresError as error:
        print(error, file=sys.stderr)
        return 2
    args.out.write_text(page, encoding="utf-8")
    print(f"\nwrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
