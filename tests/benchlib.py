"""What every benchmark script under tests/ shares: timing a child process, alternating rounds
against a baseline, and reporting medians, their ratio, the spread and peak RSS.

Rounds alternate which side runs first, so page-cache warmth and CPU frequency drift do not
favour one side. The ratio reported is the ratio of the two medians; the spread is the lowest
and highest per-round ratio, so one lucky or unlucky round is visible rather than hidden.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from bundler.cli.app import ARROW_POOL_ENV, GC_YOUNG_THRESHOLD

INSTALLED = Path(os.environ.get("BENCH_BIN") or Path(sys.executable).parent)
"""Where the commands measured are installed: the `bin` of the venv running the benchmark, or
BENCH_BIN's, a venv holding what a user installs (`pip install statics-bundler[charts]`, and
pandas where it is to be measured as an evaluation environment holds it, `datasets` bringing
it). The development venv also holds the test extra (pytest, the test Hub's server), which no
user's install loads, but a comparison there is not the one users see."""
BUNDLER = INSTALLED / "bundler"
"""The bundler's console script, as installed."""
HF = INSTALLED / "hf"
"""huggingface_hub's own command, installed with the bundler (its yardstick for uploads)."""
PREDICTION_BYTES = 4096
"""Each prediction of a realistic run: about 4 KB, as `gen_statics.py --text-words 410` writes."""
TASK = "expert-vqa"
FLOOR_PRELUDE = f"""
import gc, os
os.environ.setdefault("{ARROW_POOL_ENV}", "system")
gc.set_threshold({GC_YOUNG_THRESHOLD}, *gc.get_threshold()[1:])
"""
"""The first lines of a floor's script (a yardstick run from an interpreter that has loaded a
command's libraries): the process set up as the bundler's console script sets up its own
(bundler/cli/app.py, `main`), so that what those settings save is never charged to the floor."""


def compile_bytecode() -> None:
    """Write the bytecode of the bundler and of everything installed beside it before anything
    is timed, as `pip install` does: an install run with PYTHONDONTWRITEBYTECODE=1 (as on the
    development machine) would otherwise compile every module again in every timed run, the
    bundler's and its dependencies' alike (pandas, pyarrow, huggingface_hub: seconds), on both
    sides of a comparison with `hf`, a cost no user's install pays. Already compiled files are
    skipped, so only the first benchmark of a fresh venv pays."""
    subprocess.run([str(INSTALLED / "python"), "-c", _COMPILE], check=True)


_COMPILE = """
import compileall, pathlib, sysconfig
import bundler
compileall.compile_dir(pathlib.Path(bundler.__file__).parent, quiet=1)
for folder in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
    compileall.compile_dir(folder, quiet=1, workers=0)
"""


@dataclass(frozen=True)
class Measured:
    seconds: float
    peak_rss_kib: int
    exit_code: int
    stdout: str = ""
    """What the command wrote, when run_measured was asked to `capture` it."""
    stderr: str = ""
    cpu_seconds: float = 0.0
    """User and system CPU time of the command and the children it waited for: on a loaded
    machine a steadier figure than the wall time, which waits for the other processes too."""


_LAUNCHER = """
import os, subprocess, sys, time
started = time.perf_counter()
process = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL)
_, status, usage = os.wait4(process.pid, 0)
elapsed = time.perf_counter() - started
with open(sys.argv[1], "w") as out:
    cpu = usage.ru_utime + usage.ru_stime
    out.write(f"{os.waitstatus_to_exitcode(status)} {elapsed} {usage.ru_maxrss} {cpu}")
"""


def run_measured(
    command: Sequence[str], *, env: dict[str, str] | None = None, capture: bool = False
) -> Measured:
    """Wall time, peak RSS and exit code of one command (and its output, with `capture`).

    It is started by a small launcher of its own: Linux carries a process's peak RSS over to
    the children it forks, even across exec, so a child of the benchmark (which may have just
    written a 100,000-file tree, or hold a test Hub of 100,000 bundles) would be charged with
    the benchmark's own size. The peak is that of the command's largest process: wait4 reports
    the highest of the process's own and of the children it waited for, never their sum."""
    with tempfile.TemporaryDirectory(prefix="bundler-bench-") as folder:
        figures = Path(folder) / "measured"
        output = subprocess.PIPE if capture else subprocess.DEVNULL
        launched = subprocess.run(
            [sys.executable, "-c", _LAUNCHER, str(figures), *command],
            stdout=output,
            stderr=output,
            text=True,
            env=env,
            check=True,
        )
        code, elapsed, rss, cpu = figures.read_text().split()
    if int(code) not in (0, 1, 2):
        stderr = launched.stderr[-800:] if capture else ""
        raise SystemExit(f"{' '.join(command)} failed ({code}) {stderr}")
    return Measured(
        float(elapsed),
        int(rss),
        int(code),
        launched.stdout if capture else "",
        launched.stderr if capture else "",
        float(cpu),
    )


@dataclass
class Comparison:
    """One row of a benchmark table: the bundler's side against its baseline."""

    name: str
    subject: str
    baseline: str
    target_ratio: float | None = None
    target_difference: float | None = None
    """For start-up rows: the most seconds the subject's median may exceed the baseline's."""
    subject_seconds: list[float] = field(default_factory=list)
    baseline_seconds: list[float] = field(default_factory=list)
    subject_peak_rss_kib: int = 0
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def ratio(self) -> float:
        return statistics.median(self.subject_seconds) / statistics.median(self.baseline_seconds)

    @property
    def spread(self) -> tuple[float, float]:
        ratios = [s / b for s, b in zip(self.subject_seconds, self.baseline_seconds, strict=True)]
        return min(ratios), max(ratios)

    @property
    def difference(self) -> float:
        return statistics.median(self.subject_seconds) - statistics.median(self.baseline_seconds)

    @property
    def met(self) -> bool:
        ratio_met = self.target_ratio is None or self.ratio <= self.target_ratio
        difference_met = self.target_difference is None or self.difference <= self.target_difference
        return ratio_met and difference_met

    def line(self) -> str:
        low, high = self.spread
        target = f" (target <= {self.target_ratio}x)" if self.target_ratio is not None else ""
        if self.target_difference is not None:
            target = (
                f", difference {self.difference * 1000:+.0f} ms "
                f"(target <= +{self.target_difference * 1000:.0f} ms)"
            )
        extra = "".join(f", {key} {value}" for key, value in self.extra.items())
        return (
            f"{self.name}: {self.subject} {statistics.median(self.subject_seconds):.3f} s, "
            f"{self.baseline} {statistics.median(self.baseline_seconds):.3f} s, "
            f"ratio of medians {self.ratio:.2f}x{target}, per-round {low:.2f}-{high:.2f}x, "
            f"peak RSS {self.subject_peak_rss_kib / 1024:.0f} MiB{extra}"
        )

    def as_json(self) -> dict[str, object]:
        low, high = self.spread
        return asdict(self) | {
            "subject_median": statistics.median(self.subject_seconds),
            "baseline_median": statistics.median(self.baseline_seconds),
            "ratio_of_medians": self.ratio,
            "difference": self.difference,
            "spread": [low, high],
            "met": self.met,
        }


def alternate(
    comparison: Comparison,
    rounds: int,
    subject: Callable[[], Measured],
    baseline: Callable[[], float],
) -> Comparison:
    """Run both sides `rounds` times, swapping which goes first each round."""
    for number in range(rounds):
        if number % 2 == 0:
            measured = subject()
            base = baseline()
        else:
            base = baseline()
            measured = subject()
        comparison.subject_seconds.append(measured.seconds)
        comparison.baseline_seconds.append(base)
        comparison.subject_peak_rss_kib = max(
            comparison.subject_peak_rss_kib, measured.peak_rss_kib
        )
        print(
            f"  {comparison.name} round {number + 1}: {measured.seconds:.3f} s "
            f"vs {base:.3f} s ({measured.seconds / base:.2f}x)",
            flush=True,
        )
    print(comparison.line(), flush=True)
    return comparison


MECHANISM_LAUNCHER = """
import sys
side, undo = sys.argv.pop(1), sys.argv.pop(1)
if side == "without":
    exec(undo)
sys.argv[0] = "bundler"
from bundler.cli.app import main
main()
"""
"""The installed console script's `main` (the command after argv[2]), with a mechanism
(argv[1] "with") or without it: argv[2], lines of Python that switch it off, run first. Both
sides are the same launch, so only the mechanism differs between them."""


DEFAULT_GC = """
import gc
import bundler.cli.app as app
app.GC_YOUNG_THRESHOLD = gc.get_threshold()[0]
gc.freeze = lambda: None
"""
"""Without the console script's collector settings (bundler/cli/app.py, `main`): Python's own
threshold for the youngest generation, and no freeze before the final collection."""


ARROW_POOL_KEPT = """
import bundler.cli.app as app
app.ARROW_POOL_ENV = "BUNDLER_BENCHMARK_UNUSED"
"""
"""Without Arrow allocating from the C library's heap (bundler/cli/app.py, `main`): its own
pool, pyarrow's default, which keeps what the tables' parts freed."""


PANDAS_LET_IN = """
import bundler.cli.app as app
class LetIn:
    @staticmethod
    def find_spec(*arguments):
        return None
app.PandasLeftOut = LetIn
"""
"""Without pandas left out (bundler/cli/app.py, `PandasLeftOut`): a finder in its place that
refuses nothing, so pyarrow loads pandas where it is installed."""


def pandas_installed() -> bool:
    """Whether the installed venv has pandas: only there does leaving it out change anything
    (`pandas_left_out` is measured only then)."""
    probe = "import importlib.util, sys; sys.exit(importlib.util.find_spec('pandas') is None)"
    return subprocess.run([str(INSTALLED / "python"), "-P", "-c", probe]).returncode == 0


def with_and_without(name: str, with_it: list[float], without: list[float]) -> dict[str, object]:
    """A with/without figure as the page reads it: `name`, the ratio of the medians of the
    rounds' seconds, and `name_ratios`, each round's ratio (the two sides of a round ran one
    after the other), from which the page takes the spread and judges whether the gain is
    beyond the noise (performance_figures.gain_p_value)."""
    return {
        name: round(statistics.median(with_it) / statistics.median(without), 3),
        f"{name}_ratios": [round(a / b, 3) for a, b in zip(with_it, without, strict=True)],
    }


def add_mechanism_rounds(parser: argparse.ArgumentParser) -> None:
    """The `--mechanism-rounds` option of a benchmark that measures mechanisms: a mechanism
    that saves a few percent needs more rounds than a ratio against a yardstick does for its
    gain to show beyond the noise (performance_figures.gain_p_value)."""
    parser.add_argument(
        "--mechanism-rounds",
        type=int,
        default=None,
        help="rounds of each with/without figure of a mechanism (default: --rounds)",
    )


def rounds_of_mechanisms(args: argparse.Namespace) -> int:
    """The rounds of each with/without figure: --mechanism-rounds, or else --rounds."""
    return int(args.mechanism_rounds or args.rounds)


def mechanism_gain(
    name: str,
    arguments: Callable[[], Sequence[str]],
    undo: str,
    rounds: int,
    env: dict[str, str] | None = None,
) -> dict[str, object]:
    """A mechanism's with/without figure for docs/performance.md ("What each mechanism
    gains"): the command `arguments()` gives (called before each run, to prepare it: a fresh
    output folder, a fresh repository), run `rounds` times with the mechanism and without it
    (`undo`, MECHANISM_LAUNCHER), alternating which goes first, each a process of the
    installed venv. Gives `name` (the ratio of the wall medians with/without), `name_cpu` (of
    the CPU medians), `name_ratios` (each round's wall ratio) and `name_peak_rss_mib` (each
    side's highest peak RSS, with and without); nothing where a run fails (an install without
    the mechanism)."""
    figures: dict[str, list[Measured]] = {"with": [], "without": []}
    for number in range(rounds):
        for side in ("with", "without") if number % 2 == 0 else ("without", "with"):
            launched = [str(INSTALLED / "python"), "-P", "-c", MECHANISM_LAUNCHER, side, undo]
            measured = run_measured([*launched, *arguments()], env=env)
            if measured.exit_code != 0:
                return {}
            figures[side].append(measured)
    with_it, without = figures["with"], figures["without"]
    gain = with_and_without(name, [m.seconds for m in with_it], [m.seconds for m in without])
    cpu = [statistics.median(m.cpu_seconds for m in side) for side in (with_it, without)]
    gain |= {
        f"{name}_cpu": round(cpu[0] / cpu[1], 3),
        f"{name}_peak_rss_mib": [
            round(max(m.peak_rss_kib for m in side) / 1024) for side in (with_it, without)
        ],
    }
    print(f"  {name}: {gain}", flush=True)
    return gain


def machine() -> dict[str, object]:
    """What the figures were measured on, as docs/performance.md names it: a ratio travels
    between machines better than a second does, but neither travels far without these."""
    memory_kib = _proc_field("/proc/meminfo", "MemTotal").removesuffix(" kB")
    return {
        "cpus": os.cpu_count(),
        "cpu_model": _proc_field("/proc/cpuinfo", "model name") or platform.processor(),
        "memory_gib": round(int(memory_kib) / 2**20, 1) if memory_kib.isdigit() else None,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def _proc_field(path: str, name: str) -> str:
    """A field of a Linux /proc file (its first occurrence), or "" where there is none."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return ""
    for line in lines:
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return ""


def report_figures(path: Path | None, comparisons: list[Comparison]) -> None:
    """Print every row's summary line, then write the figures to `path` (the page's input)."""
    print("\nsummary:")
    for comparison in comparisons:
        print(comparison.line())
    if path is None:
        return
    payload = {"machine": machine(), "comparisons": [c.as_json() for c in comparisons]}
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


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


def write_own_run(root: Path, rows: int, *, model: str = "bench/model-1", text: str = "") -> None:
    """One run with `rows` predictions of about PREDICTION_BYTES each, from tests/factory.py."""
    from factory import RunSpec, write_run

    spec = RunSpec(task=TASK, model=model, rows=0, thoughts_chars=0)
    run_dir = write_run(root, spec)
    text = text or corpus()
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


def write_realistic(root: Path, rows: int, gen_statics: Path | None = None) -> None:
    """One run of `rows` realistic predictions of about 4 KB each: by default from the project's
    own writer (tests/factory.py); with `gen_statics` (the harness's statics generator script,
    given with a benchmark's --gen-statics PATH) from `gen_statics.py --text-words 410`."""
    if gen_statics is None:
        write_own_run(root, rows)
        return
    command = [sys.executable, str(gen_statics), str(root), "--tasks", "1", "--models", "1"]
    command += ["--rows", str(rows), "--text-words", "410"]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)


def realistic_name(rows: int, gen_statics: Path | None) -> str:
    """A realistic row's name says which writer made its tree."""
    return f"{'gen-statics' if gen_statics is not None else 'realistic'}-{rows}"


GEN_STATICS_HELP = (
    "write the realistic trees with this statics generator script (gen_statics.py) "
    "instead of the project's own writer"
)


def tree_bytes(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())
