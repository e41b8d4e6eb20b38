"""What `bundler audit` spread over runners costs, measured on the local Hub server with its
rate limits on, and what that gives for 100,000 bundles. Run by hand:
`python tests/benchmark_audit_shards.py --size 200 --json-out FILE`.

Measured, on a board of `--size` bundles: the file and API requests of a whole audit and of
every shard of 1, 8 and 32 (each shard run as a runner of its own runs it: a process of its
own, a fresh HF_HOME, a client with a rate-limit quota of its own), of the merge, and each
one's wall time, under the Hub's anonymous limits on a scaled clock: the server's window and
both quotas divided by `--scale` (3,000 file and 500 API requests per 300 s become 50 and 8
per 5 s at 60), the audit's pacer given the same window and budget. The rate a client may keep
up is the Hub's; only a window's burst is smaller (stricter). The pacer's arithmetic
(`shard_seconds`: a shard's own start, then its requests paced) is checked against each
shard's measured time.

Computed, from those measurements: the time to audit 100,000 bundles with 1, 8 and 32 runners
under the Hub's own numbers (3,000 file requests per 5 minutes per client, 100 of them kept for
retries: bundler.hub.audit.pace), with the measured requests per bundle and per shard, the
largest shard of 100,000 ids (the shards' split is a hash: computed exactly), and the measured
time a request's work and a shard's start take when nothing waits, on this machine (a CI
runner's differ; at the Hub's limits the wait, not the work, sets the time)."""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchlib import BUNDLER, compile_bytecode, machine, run_measured
from benchmark_scale import TOKENS, generate, the_dataset
from hubserver import HubServer, RateLimits, client_env
from scalelib import defined_tasks, repository_files, run_specs

from bundler.hub.audit.pace import ANONYMOUS_RESOLVERS, RESOLVER_MARGIN, WINDOW_SECONDS
from bundler.hub.audit.shards import owner

REPO_ID = "bench/audit-shards"
RUNNERS = (1, 8, 32)
BOARD = 100_000
BUNDLES_PER_PART = 1000
LISTING_PAGE = 1000
"""Files of `bundles/` the Hub lists a page (two a bundle)."""


def paced_seconds(requests: int, budget: int, window: float, per_request: float) -> float:
    """How long the audit's pacer takes for `requests` downloads, each taking `per_request`
    seconds of work, when at most `budget` fit in any `window`: a burst of `budget`, then a
    wait for the window to slide, then the next (the work of a window fits in it when
    `budget * per_request < window`, as here); the last window's work, whatever is left."""
    if budget * per_request >= window:
        return requests * per_request
    full = max(0, math.ceil(requests / budget) - 1)
    return full * window + (requests - full * budget) * per_request


def one_shard(argv: Sequence[str]) -> int:
    """A shard run with a scaled pacer, in the process the benchmark started for it (its
    HF_HOME and endpoint set): its report and wall time as JSON on stdout."""
    from bundler.hub.audit.pace import Pacer
    from bundler.hub.audit.run import AuditOptions, audit
    from bundler.hub.audit.shards import Shard
    from bundler.hub.client.session import HubSession

    commit, index, count, budget, window = argv
    started = time.perf_counter()
    report = audit(
        HubSession(REPO_ID, token=False),
        AuditOptions(revision=commit, shard=Shard(int(index), int(count))),
        None,
        Pacer(budget=int(budget), window=float(window)),
    )
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "report": report.model_dump(mode="json")}))
    return 0


class Bench:
    def __init__(self, hub: HubServer, work: Path, scale: int) -> None:
        self.hub, self.work, self.scale = hub, work, scale
        self.budget = (ANONYMOUS_RESOLVERS - RESOLVER_MARGIN) // scale
        self.window = WINDOW_SECONDS / scale
        self.homes = 0

    def env(self) -> dict[str, str]:
        """A fresh runner: a home of its own, no token."""
        self.homes += 1
        return os.environ | client_env(self.hub, "", hf_home=str(self.work / f"h{self.homes}"))

    def counted(self) -> dict[str, int]:
        counts = self.hub.request_counts(REPO_ID)
        self.hub.reset_requests()
        self.hub.reset_rate_limits()  # the next is a client of its own
        return {"file": counts["file"], "api": counts["api"]}

    def whole(self) -> dict[str, Any]:
        """A whole audit with no rate limit: requests, and the time a bundle takes."""
        self.hub.disable_rate_limits()
        self.hub.reset_requests()
        run = run_measured([str(BUNDLER), "audit", "--repo", REPO_ID, "--json"], env=self.env())
        figures = {"exit_code": run.exit_code, "seconds": round(run.seconds, 2)}
        return figures | self.counted()

    def shard(
        self, commit: str, index: int, count: int, report: Path, budget: int | None = None
    ) -> dict[str, Any]:
        """One shard in a process of its own, its pacer given `budget` (default: the scaled
        one) in the scaled window."""
        import subprocess

        args = [commit, index, count, budget or self.budget, self.window]
        ran = subprocess.run(
            [sys.executable, __file__, "--one-shard", *map(str, args)],
            env=self.env(),
            capture_output=True,
            text=True,
            check=False,
        )
        assert ran.returncode == 0, ran.stderr[-3000:]
        result = json.loads(ran.stdout)
        report.write_text(json.dumps(result["report"] | {"kind": "audit", "exit_code": 0}))
        shard = result["report"]["shard"]
        counts = self.counted()
        return {
            "shard": index,
            "bundles": len(result["report"]["audited"]),
            "covered": len(shard["covered"]),
            "seconds": round(result["seconds"], 2),
            "waits": len(result["report"]["waits"]),
        } | counts

    def merge(self, reports: list[Path]) -> dict[str, Any]:
        command = [str(BUNDLER), "audit", "--merge", *map(str, reports), "--json"]
        run = run_measured(command, env=self.env())
        return {"exit_code": run.exit_code, "seconds": round(run.seconds, 2)} | self.counted()


def spread(bench: Bench, commit: str, count: int) -> dict[str, Any]:
    """Every shard of `count`, one after the other (each a runner of its own), then the
    merge; the wall time of `count` runners is the slowest shard's, then the merge's."""
    folder = bench.work / f"reports-{count}"
    folder.mkdir()
    shards = [
        bench.shard(commit, index, count, folder / f"audit-{index}.json")
        for index in range(1, count + 1)
    ]
    merged = bench.merge(sorted(folder.iterdir()))
    slowest = max(shard["seconds"] for shard in shards)
    return {
        "runners": count,
        "shards": shards,
        "merge": merged,
        "wall_seconds": round(slowest + merged["seconds"], 2),
    }


def line(points: list[tuple[float, float]]) -> tuple[float, float]:
    """The least-squares line through `points`: (slope, intercept)."""
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread_x = sum((x - mean_x) ** 2 for x, _ in points)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread_x
    return slope, mean_y - slope * mean_x


def per_bundle(runs: list[dict[str, Any]], alone: dict[str, Any], size: int) -> dict[str, float]:
    """From every shard run: file requests a bundle and a shard's own (its rules and parts),
    the line through (bundles judged, file requests); and, from the shards that never waited
    and the unlimited one, the seconds a file request's work takes and a shard's own (its
    start, listings and parts), the line through (file requests, seconds)."""
    shards = [s for run in runs for s in run["shards"]]
    per, own = line([(s["bundles"], s["file"]) for s in shards])
    unpaced = [(s["file"], s["seconds"]) for s in [*shards, alone] if s["waits"] == 0]
    work, start = line(unpaced)
    return {
        "file_per_bundle": round(per, 3),
        "file_per_shard": round(own, 2),
        "api_per_shard_max": max(s["api"] for s in shards),
        "parts": math.ceil(size / BUNDLES_PER_PART),
        "seconds_per_file_request": round(work, 4),
        "seconds_per_shard": round(start, 2),
    }


def largest_shard(count: int, size: int = BOARD) -> int:
    """The most bundle ids of `size` any of `count` shards covers (the split is a hash of
    each id: computed exactly, on ids shaped as the bundler's)."""
    held = [0] * count
    for n in range(size):
        held[owner(f"player-{n}_{n:08x}/task-{n % 10}@a1b2c3d4", count) - 1] += 1
    return max(held)


def shard_seconds(requests: int, budget: int, window: float, fitted: dict[str, float]) -> float:
    """A shard's wall time: its own start, then its requests paced."""
    paced = paced_seconds(requests, budget, window, fitted["seconds_per_file_request"])
    return fitted["seconds_per_shard"] + paced


def extrapolated(fitted: dict[str, float]) -> list[dict[str, Any]]:
    """The time for 100,000 bundles with 1, 8 and 32 runners under the Hub's own limits (the
    slowest shard's; the merge's is not counted)."""
    budget = ANONYMOUS_RESOLVERS - RESOLVER_MARGIN
    parts = math.ceil(BOARD / BUNDLES_PER_PART)
    out = []
    for count in RUNNERS:
        bundles = largest_shard(count)
        requests = math.ceil(fitted["file_per_bundle"] * bundles) + 2 + parts
        seconds = shard_seconds(requests, budget, WINDOW_SECONDS, fitted)
        api = math.ceil(2 * BOARD / LISTING_PAGE) + int(fitted["api_per_shard_max"])
        out.append(
            {
                "runners": count,
                "largest_shard_bundles": bundles,
                "file_requests": requests,
                "api_requests_at_most": api,
                "seconds": round(seconds),
                "hours": round(seconds / 3600, 2),
            }
        )
    return out


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--one-shard"]:
        return one_shard(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--scale", type=int, default=60, help="window and quotas divided by")
    parser.add_argument("--runners", type=int, nargs="+", default=list(RUNNERS))
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bundler-bench-shards-"))
    hub = HubServer(tokens=TOKENS).start()
    try:
        compile_bytecode()
        seeds = generate(work / "runs", run_specs(args.size, **the_dataset(hub)))
        hub.create_repo(REPO_ID, files=repository_files(seeds, REPO_ID, defined_tasks(seeds)))
        commit = hub.commits(REPO_ID)[0].oid
        bench = Bench(hub, work, args.scale)
        whole = bench.whole()
        alone = bench.shard(commit, 1, 1, work / "alone.json", budget=10**9)  # no wait
        print(json.dumps({"whole": whole, "one_shard_unlimited": alone}), flush=True)
        scaled = RateLimits(
            anonymous_api=500 // args.scale,
            anonymous_resolvers=3000 // args.scale,
            window=round(WINDOW_SECONDS / args.scale),
        )
        hub.enable_rate_limits(scaled)
        runs = []
        for count in args.runners:
            run = spread(bench, commit, count)
            print(json.dumps({k: v for k, v in run.items() if k != "shards"}), flush=True)
            runs.append(run)
        fitted = per_bundle(runs, alone, args.size)
        checks = [
            {
                "runners": run["runners"],
                "slowest_shard_measured": max(s["seconds"] for s in run["shards"]),
                "slowest_shard_paced": round(
                    max(
                        shard_seconds(s["file"], bench.budget, bench.window, fitted)
                        for s in run["shards"]
                    ),
                    2,
                ),
            }
            for run in runs
        ]
        payload = {
            "machine": machine(),
            "load_average": os.getloadavg(),
            "size": args.size,
            "scale": args.scale,
            "scaled_limits": {"file": scaled.anonymous_resolvers, "api": scaled.anonymous_api}
            | {"window_seconds": scaled.window, "pacer_budget": bench.budget},
            "measured": {"whole": whole, "one_shard_unlimited": alone, "runs": runs}
            | {"per_bundle": fitted}
            | {"paced_check": checks},
            "computed_100000": extrapolated(fitted),
        }
        print(json.dumps({k: payload[k] for k in ("measured", "computed_100000")}, indent=1))
        if args.json_out is not None:
            args.json_out.write_text(json.dumps(payload, indent=2) + "\n")
        return 0
    finally:
        hub.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
