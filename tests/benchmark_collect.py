"""Benchmark: `bundler collect` against its baselines.

A script, not a test (pytest does not collect `benchmark_*.py`; the suite runs it once at a
tiny size as a smoke test). Every row alternates rounds of the installed `bundler` console
script and its baseline in the same run and prints both medians, the ratio of medians, the
spread of per-round ratios and the bundler's peak RSS:

- collect of a realistic tree (about 4 KB per prediction; the project's own writer, or with
  --gen-statics PATH a `gen_statics.py --text-words 410` tree) at --rows and
  --large-rows predictions, against `tar -cf - DIR | zstd -3 -T0`, and at --rows also
  against DURABLE_FLOOR, the same archive written with the same fsyncs by a few lines of
  Python (tarfile and zstandard), within 1.3x of which the bundler must stay;
- collect of a tree from the project's own writer (tests/factory.py) at --rows;
- collect of --runs runs of --run-rows predictions each (per-run overhead), against the same
  two baselines, then with and without two of its mechanisms (benchlib.mechanism_gain): the
  later half of the runs bundled in a forked child (`forked_bundling`) and the console
  script's collector settings (`gc_settings`).

Start-up (`--help`, `--version`, an empty collect) is tests/benchmark_startup.py's, against a
bare typer app with the bundler's own commands.

    .venv/bin/python tests/benchmark_collect.py --rounds 7 --json-out /tmp/collect.json
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from benchlib import (
    BUNDLER,
    DEFAULT_GC,
    GEN_STATICS_HELP,
    TASK,
    Comparison,
    Measured,
    add_mechanism_rounds,
    alternate,
    compile_bytecode,
    corpus,
    machine,
    mechanism_gain,
    realistic_name,
    report_figures,
    rounds_of_mechanisms,
    run_measured,
    tree_bytes,
    write_own_run,
    write_realistic,
)

DURABLE_FLOOR = """
import hashlib, io, json, os, shutil, sys, tarfile, tempfile
from datetime import datetime
from concurrent.futures import ThreadPoolExecutor
import zstandard

source, target = sys.argv[1], sys.argv[2]
shutil.rmtree(target, ignore_errors=True)
os.makedirs(target)
runs = []
for folder, subfolders, names in os.walk(source):
    subfolders.sort()
    if "run_meta.json" in names:
        numbers = [name[11:-5] for name in names if name.startswith("prediction_")]
        indices = sorted(int(number) for number in numbers if number.isdigit())
        runs.append((folder, indices))

def read(path):
    descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        return os.read(descriptor, os.fstat(descriptor).st_size)
    finally:
        os.close(descriptor)

def member(name, data, mtime):
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), mtime
    header = info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")
    return header + data + bytes(-len(data) % 512)

def make_durable(staged):
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(os.fsync, [descriptor for descriptor, _, _ in staged]))
    for descriptor, temporary, final in staged:
        os.close(descriptor)
        os.replace(temporary, final)
    names = {os.path.dirname(final) for _, _, final in staged} | {target}  # and new folders'
    folders = [os.open(folder, os.O_RDONLY) for folder in names]
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(os.fsync, folders))
    for descriptor in folders:
        os.close(descriptor)

def bundle(numbered):
    inline = zstandard.ZstdCompressor(level=3, write_checksum=True)
    threaded = zstandard.ZstdCompressor(level=3, write_checksum=True, threads=os.cpu_count())
    staged = []
    for number, (folder, indices) in numbered:
        members = [("run_meta.json", "run_meta.json"), ("metrics.json", "metrics.json")]
        members += [(f"prediction_{i}.json", f"predictions/prediction_{i}.json") for i in indices]
        large = len(indices) >= 1000
        body, listing, tar_size = tempfile.TemporaryFile() if large else io.BytesIO(), [], 0
        with (threaded if large else inline).stream_writer(body, closefd=False) as out:
            for source_name, name in members:
                data = read(os.path.join(folder, source_name))
                if name == "run_meta.json":
                    date = json.loads(data)["run_date"]
                    mtime = int(datetime.fromisoformat(date).timestamp())
                digest = hashlib.sha256(data).hexdigest()
                listing.append({"path": name, "size": len(data), "sha256": digest})
                out.write(block := member(name, data, mtime))
                tar_size += len(block)
        head = member("manifest.json", json.dumps({"files": listing}, indent=2).encode(), mtime)
        tar_size += len(head)
        end = bytes(1024 + -(tar_size + 1024) % 10240)
        archive = io.BytesIO()
        archive.write(inline.compress(head))
        body.seek(0)
        shutil.copyfileobj(body, archive)
        archive.write(inline.compress(end))
        data = archive.getvalue()
        sidecar = {"archive": {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}}
        bundle_folder = os.path.join(target, f"run-{number}")
        os.mkdir(bundle_folder)
        for name, content in (("run.tar.zst", data), ("run.json", json.dumps(sidecar).encode())):
            final = os.path.join(bundle_folder, name)
            temporary = os.path.join(bundle_folder, f".{name}.tmp")
            descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            os.write(descriptor, content)
            staged.append((descriptor, temporary, final))
        if len(staged) >= 128:
            make_durable(staged)
            staged = []
    make_durable(staged)

numbered = list(enumerate(runs))
if len(numbered) < 2:
    bundle(numbered)
    sys.exit()
child = os.fork()
if child == 0:
    bundle(numbered[len(numbered) // 2 :])
    os._exit(0)
bundle(numbered[: len(numbered) // 2])
os.waitpid(child, 0)
"""
"""The floor of collecting runs durably, in a few lines of Python (tarfile and zstandard): the
same archives (a manifest listing every file's path, size and sha256, then run_meta.json,
metrics.json and the predictions under the bundler's names and with its mtime, the run's date,
as tarfile writes them in PAX form, one member after another: every member after the manifest
is byte for byte the bundler's, which tests/test_benchmarks.py checks), compressed as the
bundler compresses them (zstd at its level, a run of 1,000 predictions or more by one worker
thread a core, each file read once and the body compressed aside while the manifest is not yet
known, so memory stays bounded) and the same fsyncs (each archive and sidecar fsynced before
it is renamed into place, many at once, then each folder and the folder holding the new
ones), with half of many runs in a forked
child as the bundler bundles them; and nothing else: no check, no claim, no cache, no report.
What stands between a bundler that writes every archive durably and `tar | zstd`, which writes
one stream of the whole tree and never fsyncs."""


IN_ONE_PROCESS = """
import bundler.local.bundling as bundling
bundling.FORK_WEIGHT = float("inf")
"""
"""Without the later half of many runs bundled in a forked child (bundler/local/bundling.py,
`bundle_all`): every run bundled in the one process."""


def write_many_runs(root: Path, runs: int, rows: int) -> None:
    text = corpus(size=1 << 20)
    for number in range(runs):
        write_own_run(root, rows, model=f"bench/model-{number}", text=text)


def collect_row(
    name: str,
    build: Callable[[Path], None],
    expect: str | None,
    workdir: Path,
    rounds: int,
    target: float | None = None,
    *,
    against_floor: bool = False,
    mechanisms: dict[str, str] | None = None,
    mechanism_rounds: int = 0,
) -> list[Comparison]:
    """The bundler against `tar | zstd` on a tree `build` writes; also against DURABLE_FLOOR
    with `against_floor`; and with and without each of `mechanisms` (its name and the lines
    that switch it off, benchlib.mechanism_gain), `mechanism_rounds` rounds each, into the first
    row's extra."""
    root = workdir / name
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    build(root)
    size = tree_bytes(root)
    print(f"{name}: wrote {size / 1e6:.1f} MB in {time.perf_counter() - started:.1f} s", flush=True)
    out = workdir / f"{name}-bundles"
    tar_out = workdir / f"{name}.tar.zst"
    command = [str(BUNDLER), "collect", str(root), "-o", str(out)]
    command += ["--expect", expect] if expect else ["--allow-partial"]
    # CPU seconds (user and system) of each side's rounds: on a machine other jobs keep busy,
    # a steadier comparison than the wall time, which waits for them too.
    cpu: dict[str, list[float]] = {"bundler": [], "baseline": []}

    def bundler() -> Measured:
        shutil.rmtree(out, ignore_errors=True)
        measured = run_measured(command)
        if measured.exit_code != 0:
            raise SystemExit(f"{name}: collect exited {measured.exit_code}")
        cpu["bundler"].append(measured.cpu_seconds)
        return measured

    def tar_zstd() -> float:
        tar_out.unlink(missing_ok=True)
        script = f"tar -cf - -C {root} . | zstd -3 -T0 -q -o {tar_out}"
        measured = run_measured(["bash", "-o", "pipefail", "-c", script])
        cpu["baseline"].append(measured.cpu_seconds)
        return measured.seconds

    comparison = Comparison(name, "bundler collect", "tar | zstd -3 -T0", target_ratio=target)
    comparison.extra["tree_mb"] = round(size / 1e6, 1)
    alternate(comparison, rounds, bundler, tar_zstd)
    comparison.extra["bundle_mb"] = round(archive_bytes(out) / 1e6, 1)
    comparison.extra["tar_zst_mb"] = round(tar_out.stat().st_size / 1e6, 1)
    comparison.extra |= cpu_medians(cpu)
    comparisons = [comparison]

    def afresh() -> list[str]:
        shutil.rmtree(out, ignore_errors=True)
        return command[1:]

    for mechanism, undo in (mechanisms or {}).items():
        comparison.extra |= mechanism_gain(mechanism, afresh, undo, mechanism_rounds)
    if against_floor:
        floor_script, floor_out = workdir / "durable_floor.py", workdir / f"{name}-floor"
        floor_script.write_text(DURABLE_FLOOR, encoding="utf-8")
        cpu = {"bundler": [], "baseline": []}

        def floor() -> float:
            # The previous round's output removed before the clock starts, as the bundler's is
            # (`bundler` above): removing 500 bundle folders was charged to the floor alone.
            shutil.rmtree(floor_out, ignore_errors=True)
            measured = run_measured([sys.executable, str(floor_script), str(root), str(floor_out)])
            if measured.exit_code != 0:
                raise SystemExit(f"{name}: the durable floor exited {measured.exit_code}")
            cpu["baseline"].append(measured.cpu_seconds)
            return measured.seconds

        versus = Comparison(
            f"{name}-floor", "bundler collect", "durable floor (no checks)", target_ratio=1.3
        )
        comparisons.append(alternate(versus, rounds, bundler, floor))
        versus.extra["floor_bundle_mb"] = round(archive_bytes(floor_out) / 1e6, 1)
        versus.extra |= cpu_medians(cpu)
        shutil.rmtree(floor_out, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    return comparisons


def cpu_medians(cpu: dict[str, list[float]]) -> dict[str, float]:
    """`bundler_cpu_s` and `baseline_cpu_s`: each side's median CPU seconds over its rounds."""
    return {f"{side}_cpu_s": round(statistics.median(seconds), 3) for side, seconds in cpu.items()}


def archive_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*.tar.zst"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternated rounds per row")
    parser.add_argument("--rows", type=int, default=20_000, help="predictions in the main runs")
    parser.add_argument("--large-rows", type=int, default=100_000, help="0 skips the large run")
    parser.add_argument("--runs", type=int, default=500, help="runs in the many-runs tree")
    parser.add_argument("--run-rows", type=int, default=40, help="predictions per small run")
    parser.add_argument("--only", action="append", help="run only these rows (repeatable)")
    parser.add_argument("--workdir", type=Path, default=None, help="where to write (a tmp dir)")
    parser.add_argument("--json-out", type=Path, default=None, help="write the figures as JSON")
    parser.add_argument("--gen-statics", type=Path, default=None, help=GEN_STATICS_HELP)
    add_mechanism_rounds(parser)
    args = parser.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bundler-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}", flush=True)
    compile_bytecode()
    plans: dict[str, Callable[[], list[Comparison]]] = {
        "gen-statics": lambda: collect_row(
            realistic_name(args.rows, args.gen_statics),
            lambda root: write_realistic(root, args.rows, args.gen_statics),
            f"{TASK}={args.rows}",
            workdir,
            args.rounds,
            target=2.0,
            against_floor=True,
        ),
        "gen-statics-large": lambda: (
            collect_row(
                realistic_name(args.large_rows, args.gen_statics),
                lambda root: write_realistic(root, args.large_rows, args.gen_statics),
                f"{TASK}={args.large_rows}",
                workdir,
                max(1, args.rounds // 2),
                target=1.5,
            )
            if args.large_rows
            else []
        ),
        "own-writer": lambda: collect_row(
            f"own-writer-{args.rows}",
            lambda root: write_own_run(root, args.rows),
            f"{TASK}={args.rows}",
            workdir,
            args.rounds,
        ),
        "many-runs": lambda: collect_row(
            f"runs-{args.runs}x{args.run_rows}",
            lambda root: write_many_runs(root, args.runs, args.run_rows),
            f"{TASK}={args.run_rows}",
            workdir,
            args.rounds,
            target=3.0,
            against_floor=True,
            mechanisms={"forked_bundling": IN_ONE_PROCESS, "gc_settings": DEFAULT_GC},
            mechanism_rounds=rounds_of_mechanisms(args),
        ),
    }
    comparisons: list[Comparison] = []
    try:
        for name, plan in plans.items():
            if args.only and name not in args.only:
                continue
            comparisons.extend(plan())
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)
    report_figures(args.json_out, comparisons)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
