"""Benchmark: what each command costs as the leaderboard grows: requests, bytes and memory.

A script, not a test (the suite runs it once at a tiny size as a smoke test). It starts the test
suite's Hub-compatible server on 127.0.0.1 (which pages tree listings as the Hub does and keeps
its limits) and seeds it with repositories of N = 300, 3,000 and 30,000 bundles (also 100,000
with --large), each put on the server directly in one commit, laid out and derived by the
bundler's own library (tests/scalelib.py: real bundles of 3 predictions over 10 tasks,
collected once for the largest N and shared by the smaller ones). Into each it runs, as a user
would, the installed console script:

- `upload` of 1 new bundle (a new player setup), as the repository's owner;
- `upload --create-pr` of 1 new bundle, as a submitter who owns nothing there;
- `review --pr N` of that 1-bundle pull request, as the owner;
- `card`, as the owner, after that pull request was merged on the Hub's web page (the page's
  own merge call, made here by huggingface_hub: a commit on main the bundler did not make);
- `upload` of --bulk K new bundles at once, as the owner (its commits are counted too).

Each command runs with an empty HF_HOME (a fresh runner: no copy of the table is kept), and the
figures are: requests (API and file; LFS storage ones apart), the bytes the bundler sent (every
request body the server received: commit payloads, LFS objects, the card sent for validation),
the bytes the server answered with, the peak RSS of the command's largest process (os.wait4 of
the console script, through benchlib.run_measured), and the wall time with the test server's
share of it. A command the Hub refuses is kept in the table with its exit code and why. The
summary gives each figure's growth from the smallest N to each larger one: 1.00x is a cost
independent of the repository's size. With --rounds R, every command but the bulk upload runs R
times, each time with a new bundle, and the medians are shown. --json-out writes every figure.

    .venv/bin/python tests/benchmark_scale.py --rounds 3 --json-out /tmp/scale.json
    .venv/bin/python tests/benchmark_scale.py --large    # also N = 100,000: 6 to 9 minutes

Collecting the bundles takes most of the time (4 to 6 minutes for 100,000 on 2 cores), in
/dev/shm where there is one (--scratch): about 3 GB of memory there, as much in this process.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from benchlib import BUNDLER, compile_bytecode, machine, run_measured
from factory import RunSpec
from hubserver import HubServer, RepoLimits, TokenInfo, client_env
from huggingface_hub import HfApi, constants
from scalelib import (
    PREDICTIONS,
    SeedBundle,
    bundles_of,
    defined_tasks,
    repository_files,
    run_specs,
    seed_bundles,
)

from bundler.core.environment import MAX_REPO_FILES_ENV
from bundler.local.submitter import Submitter

OWNER_TOKEN = "hf_BenchmarkWriteToken0123456789abcdef"
SUBMITTER_TOKEN = "hf_BenchmarkSubmitterToken0123456789ab"
TOKENS = {
    OWNER_TOKEN: TokenInfo(name="bench-bot", role="write", orgs=("bench",)),
    SUBMITTER_TOKEN: TokenInfo(name="submitter", role="write"),
}
DATASET = "GPTNT/statics"
SIZES = [300, 3_000, 30_000]
LARGE = 100_000
AS_THE_HUB = RepoLimits(files=None)
"""The Hub's limits as it applies them: 10,000 entries a folder, and no refusal past 100,000
files a repository, which it only advises against (this server refuses there by default, never
kinder than the Hub). Two files a bundle, 100,000 bundles are 200,000 files: a repository the
Hub serves, and one the bundler refuses to add to (its own check of the advice)."""
SCRATCH = Path("/dev/shm")
"""A memory file system: the runs of 100,000 bundles are 500,000 small files, which a disk
mounted with `discard` takes minutes to write and more to remove (about 3 GB of memory)."""
FIGURES = ("requests", "sent_kib", "received_kib", "peak_rss_mib", "seconds", "own_seconds")
"""The figures whose growth is shown, in the table's order. `own_seconds` is the wall time less
the time the test server spent answering (HubServer.seconds_serving): each commit there is a
full snapshot of the repository, which costs the server more as it grows, and that is no cost
of the bundler's."""

AGREED_FILES = 1_000_000
"""The files the bundler lets a repository hold here (BUNDLER_MAX_REPO_FILES): as for owners who
agreed more with the Hub, since 100,000 bundles are 200,000 files, past the 100,000 it
recommends, where the bundler stops by default."""

Figures = dict[str, Any]


class Bench:
    """The server, the bundles to seed and to add, and every figure measured so far."""

    def __init__(
        self, hub: HubServer, workdir: Path, seeds: list[SeedBundle], extra: list[SeedBundle]
    ) -> None:
        self.hub = hub
        self.workdir = workdir
        self.seeds = seeds
        """The bundles a repository is seeded with, its first N."""
        self.extra = extra
        """The bundles the commands add, the same ones at every N."""
        self.figures: dict[str, dict[int, list[Figures]]] = {}
        self._runs = 0

    def folder_of(self, seeds: Sequence[SeedBundle]) -> Path:
        """A local bundles folder holding exactly these bundles."""
        self._runs += 1
        folder = self.workdir / f"local-{self._runs}"
        for seed in seeds:
            seed.copy_to(folder)
        return folder

    def run(self, name: str, size: int, args: list[str], token: str = OWNER_TOKEN) -> Figures:
        """Run one bundler command with a fresh HF_HOME and record what it cost."""
        self._runs += 1
        home = self.workdir / f"home-{self._runs}"
        env = os.environ | client_env(self.hub, token, hf_home=str(home))
        env[MAX_REPO_FILES_ENV] = str(AGREED_FILES)
        self.hub.reset_requests()
        measured = run_measured([str(BUNDLER), *args, "--json"], env=env, capture=True)
        counts, sent = self.hub.request_counts(), self.hub.request_bytes()
        received = self.hub.response_bytes()
        report = _json_or_empty(measured.stdout)
        figures: Figures = {
            "requests": counts["api"] + counts["file"],
            "api": counts["api"],
            "file": counts["file"],
            "storage": counts["storage"],
            "sent_kib": round(sum(sent.values()) / 1024, 1),
            "received_kib": round(sum(received.values()) / 1024, 1),
            "peak_rss_mib": round(measured.peak_rss_kib / 1024, 1),
            "seconds": round(measured.seconds, 3),
            "server_seconds": round(self.hub.seconds_serving(), 3),
            "own_seconds": round(max(0.0, measured.seconds - self.hub.seconds_serving()), 3),
            "exit_code": measured.exit_code,
            "report": report,
        }
        if isinstance(report.get("commits"), list):
            figures["commits"] = len(report["commits"])
        if measured.exit_code != 0:
            figures["why"] = _why(report, measured.stderr)
        shutil.rmtree(home, ignore_errors=True)
        return self.record(name, size, figures)

    def refused(self, name: str, size: int, why: str) -> Figures:
        """A command that could not be measured: what stood in its way."""
        return self.record(name, size, {"exit_code": None, "why": why})

    def record(self, name: str, size: int, figures: Figures) -> Figures:
        self.figures.setdefault(name, {}).setdefault(size, []).append(figures)
        print(f"  N={size:>7,} {name:<34} {_cells(figures)}", flush=True)
        return figures


def _json_or_empty(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _why(report: dict[str, Any], stderr: str) -> str:
    """The first thing that explains a non-zero exit: the report's error, a bundle's detail,
    a pull request's failed check, else the last line on stderr."""
    found: list[str] = [report["error"]] if isinstance(report.get("error"), str) else []
    found += [b["detail"] for b in report.get("bundles", []) if b.get("outcome") != "published"]
    for pull_request in report.get("pull_requests", []):
        checks = [*pull_request.get("checks", [])]
        checks += [
            c for bundle in pull_request.get("bundles", []) for c in bundle.get("checks", [])
        ]
        found += [
            f"{check.get('name')} {check.get('status')}: {check.get('detail')}"
            for check in checks
            if check.get("status") != "passed"
        ]
    lines = [line for line in stderr.splitlines() if line.strip()]
    return str((found or lines[-1:] or ["(nothing said)"])[0])[:200]


def _cells(figures: Figures) -> str:
    if figures.get("exit_code") is None:
        return f"not run: {figures['why']}"
    commits = f" {figures['commits']:>3} commits" if "commits" in figures else ""
    text = (
        f"{figures['requests']:>5} req ({figures['storage']} storage) "
        f"{figures['sent_kib']:>10,.1f} KiB sent {figures['received_kib']:>10,.1f} KiB received "
        f"{figures['peak_rss_mib']:>7,.1f} MiB {figures['seconds']:>7.2f} s "
        f"({figures['server_seconds']:.2f} s server){commits}"
    )
    if figures["exit_code"] != 0:
        text += f"  exit {figures['exit_code']}: {figures['why']}"
    return text


def the_dataset(hub: HubServer) -> dict[str, str]:
    """The dataset every run ran on, on the server, its card giving the split's row count, so
    review's checks can pass (a warning would make every review exit 1)."""
    card = f"---\ndataset_info:\n  splits:\n  - name: test\n    num_examples: {PREDICTIONS}\n---\n"
    hub.create_repo(DATASET, files={"README.md": card.encode()})
    return {"hf_repo_id": DATASET, "resolved_revision": hub.commits(DATASET)[0].oid}


def web_page_merge(hub: HubServer, repo_id: str, number: int) -> None:
    """The pull request merged as the Hub's web page merges it (its own HTTP call, made by a
    maintainer's browser): a commit on main the bundler did not make. huggingface_hub in this
    process was imported without the server's environment: telemetry, read at call time, is
    turned off here, or its first request would go to the real Hub."""
    constants.HF_HUB_DISABLE_TELEMETRY = True
    api = HfApi(endpoint=hub.url, token=OWNER_TOKEN, library_name="web-page")
    api.merge_pull_request(repo_id, number, repo_type="dataset")


def measure_size(bench: Bench, size: int, rounds: int, bulk: int) -> None:
    """Seed a repository of `size` bundles and run every command into it."""
    hub, seeds = bench.hub, bench.seeds
    if len(seeds) < size:
        raise SystemExit(f"{len(seeds):,} bundles were collected, not {size:,}")
    repo_id = f"bench/scale-{size}"
    started = time.perf_counter()
    files = repository_files(seeds[:size], repo_id, defined_tasks(seeds[:size]))
    hub.create_repo(repo_id, files=files, limits=AS_THE_HUB)
    print(f"N={size:,}: seeded in {time.perf_counter() - started:.1f} s", flush=True)
    upcoming = iter(bench.extra)
    repo = ["--repo", repo_id]
    for _ in range(rounds):
        new = bench.folder_of([next(upcoming)])
        bench.run("upload 1 new", size, ["upload", str(new), *repo])
        proposed = bench.folder_of([next(upcoming)])
        opened = bench.run(
            "upload --create-pr 1 new (submitter)",
            size,
            ["upload", str(proposed), *repo, "--create-pr"],
            SUBMITTER_TOKEN,
        )
        number = opened.get("report", {}).get("pull_request_num")
        if number is None:
            bench.refused("review a 1-bundle PR", size, "no pull request was opened")
            bench.refused("card after a web-page merge of 1", size, "no pull request to merge")
            continue
        bench.run("review a 1-bundle PR", size, ["review", *repo, "--pr", str(number)])
        web_page_merge(hub, repo_id, number)
        bench.run("card after a web-page merge of 1", size, ["card", *repo])
    if bulk:
        many = bench.folder_of([next(upcoming) for _ in range(bulk)])
        bench.run(f"upload {bulk} new (bulk)", size, ["upload", str(many), *repo])


def median_of(runs: list[Figures]) -> Figures:
    """Each figure's median over the runs that ran (the first run's exit and reason)."""
    ran = [run for run in runs if run.get("exit_code") is not None]
    if not ran:
        return runs[0]
    summary = dict(ran[0])
    for key in (*FIGURES, "server_seconds", "api", "file", "storage", "commits"):
        if key in summary:
            summary[key] = statistics.median(run[key] for run in ran)
    summary.pop("report", None)
    return summary


def growth(by_size: dict[int, Figures]) -> dict[int, dict[str, float | None]]:
    """Each figure at every larger N against the smallest N's, where the command did its work
    at both (a refusal's costs are not the work's); None where the smallest N's was 0 and this
    is not: no ratio says how much more than nothing."""
    sizes = sorted(by_size)
    first = by_size[sizes[0]]
    ratios: dict[int, dict[str, float | None]] = {}
    for size in sizes[1:]:
        now = by_size[size]
        if first.get("exit_code") != 0 or now.get("exit_code") != 0:
            continue
        ratios[size] = {
            key: round(now[key] / first[key], 2) if first[key] else (None if now[key] else 1.0)
            for key in FIGURES
        }
    return ratios


def summarize(figures: dict[str, dict[int, list[Figures]]]) -> list[dict[str, Any]]:
    """Print the medians as a Markdown table, with each figure's growth from the smallest N
    (sent, received, peak RSS, time, time less the server's), and return them."""
    print("\n| command | N | requests | sent | received | peak RSS | time | growth |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    summary = []
    for name, runs in figures.items():
        by_size = {size: median_of(each) for size, each in sorted(runs.items())}
        ratios = growth(by_size)
        for size, measured in by_size.items():
            print(f"| {name} | {size:,} | {_row(measured, ratios.get(size))} |")
        summary.append({"name": name, "by_size": by_size, "growth": ratios})
    return summary


def _row(measured: Figures, ratio: dict[str, float | None] | None) -> str:
    if measured.get("exit_code") is None:
        return f"not run: {measured['why']} | | | | | |"
    commits = f", {measured['commits']:.0f} commits" if "commits" in measured else ""
    exit_code = (
        f", exit {measured['exit_code']}: {measured['why']}" if measured["exit_code"] else ""
    )
    cells = [
        f"{measured['requests']:.0f}{commits}{exit_code}",
        _size(measured["sent_kib"]),
        _size(measured["received_kib"]),
        f"{measured['peak_rss_mib']:,.0f} MiB",
        f"{measured['seconds']:.2f} s ({measured['server_seconds']:.2f} s server)",
    ]
    shown = ("sent_kib", "received_kib", "peak_rss_mib", "seconds", "own_seconds")
    cells.append(
        " / ".join("-" if ratio[key] is None else f"{ratio[key]:.2f}x" for key in shown)
        if ratio
        else ""
    )
    return " | ".join(cells)


def _size(kib: float) -> str:
    if kib >= 1024:
        return f"{kib / 1024:,.1f} MiB"
    return f"{kib:,.1f} KiB" if kib < 10 else f"{kib:,.0f} KiB"


def generate(root: Path, specs: list[RunSpec]) -> list[SeedBundle]:
    """The bundles of these runs, collected under `root` (the runs removed after)."""
    submitter = Submitter(name="Ada", contact="ada@example.org")
    seeds = seed_bundles(bundles_of(root, specs, submitter))
    shutil.rmtree(root / "output")  # 5 files a run: only their bundles are needed now
    return seeds


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=SIZES)
    parser.add_argument("--large", action="store_true", help=f"also N = {LARGE:,}")
    parser.add_argument("--bulk", type=int, default=100, help="bundles of the bulk upload")
    parser.add_argument("--rounds", type=int, default=1, help="runs of each 1-bundle command")
    parser.add_argument(
        "--scratch",
        type=Path,
        default=SCRATCH if SCRATCH.is_dir() and os.access(SCRATCH, os.W_OK) else None,
        help="where the runs are written and collected (default: /dev/shm where there is one)",
    )
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    sizes = sorted({*args.sizes, *([LARGE] if args.large else [])})
    # A stop (a CI timeout, `kill`) still removes the gigabytes of runs and bundles below.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    workdir = Path(tempfile.mkdtemp(prefix="bundler-bench-scale-"))
    workdirs = [workdir]
    hub = HubServer(tokens=TOKENS).start()
    try:
        compile_bytecode()
        print(f"machine: {machine()}", flush=True)
        started = time.perf_counter()
        added = 3 * args.rounds + args.bulk
        generated = Path(tempfile.mkdtemp(prefix="bundler-bench-scale-", dir=args.scratch))
        workdirs.append(generated)
        specs = run_specs(sizes[-1] + added, **the_dataset(hub))
        seeds = generate(generated, specs)
        print(f"{len(specs):,} bundles collected in {time.perf_counter() - started:.0f} s")
        bench = Bench(hub, workdir, seeds[: sizes[-1]], seeds[sizes[-1] :])
        for size in sizes:
            measure_size(bench, size, args.rounds, args.bulk)
        summary = summarize(bench.figures)
        if args.json_out is not None:
            payload = {"machine": machine(), "bulk": args.bulk, "rounds": args.rounds}
            args.json_out.write_text(json.dumps(payload | {"commands": summary}, indent=2))
        return 0
    finally:
        hub.stop()
        for folder in workdirs:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
