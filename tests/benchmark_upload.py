"""Benchmark: `bundler upload` against `hf upload` of the same folder, on the local Hub server.

A script, not a test (the suite runs it once at a tiny size as a smoke test). It starts the
test suite's Hub-compatible server on 127.0.0.1, collects --bundles runs into bundles, then
alternates rounds of
- `bundler upload BUNDLES --repo R1` into a fresh repository, and
- `hf upload R2 BUNDLES --repo-type dataset` into another fresh repository,
counting wall time and the API and file requests each made (LFS transfers apart); then the
same again into the now populated repositories (a re-run with nothing new). It prints medians,
the ratio of medians, the spread, request counts and peak RSS.

The fresh row also measures what keeping the parts' rows decoded (bundler/hub/leaderboard/
partrows.py) gains: in one process of the installed venv, the publishing of the same bundles
into fresh repositories alternates with and without it, and the row's `extra` gets the ratio
of medians with/without (`kept_rows`) and its per-round spread.

    .venv/bin/python tests/benchmark_upload.py --rounds 5 --json-out /tmp/upload.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from benchlib import (
    BUNDLER,
    HF,
    INSTALLED,
    Comparison,
    Measured,
    compile_bytecode,
    machine,
    report_figures,
    run_measured,
    tree_bytes,
)
from benchmark_collect import TASK, corpus, write_own_run
from hubserver import HubServer, TokenInfo, client_env

TOKEN = "hf_BenchmarkWriteToken0123456789abcdef"
KEPT_ROWS_SCRIPT = """
import json, sys, time
from pathlib import Path
from bundler.core.progress import NoProgress
from bundler.hub.leaderboard import partrows
from bundler.hub.publish.publisher import Publisher
from bundler.hub.publish.upload import UploadOptions, gather_local

bundles, token, (warm, *repos) = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
local, set_aside = gather_local(bundles, allow_partial=False, progress=NoProgress())
kept = partrows.KEPT.size


def publish(repo):
    started = time.perf_counter()
    report = Publisher(UploadOptions(repo_id=repo, token=token)).run(list(local), set_aside)
    if report.exit_code != 0:
        raise SystemExit(f"{repo}: {report.error}")
    return time.perf_counter() - started


publish(warm)  # imports, the card's template and the page cache, before anything is timed
figures = {"with": [], "without": []}
for number, pair in enumerate(zip(repos[::2], repos[1::2])):
    for keep, repo in zip((True, False) if number % 2 == 0 else (False, True), pair):
        partrows.KEPT.size = kept if keep else 0
        figures["with" if keep else "without"].append(publish(repo))
print(json.dumps(figures))
"""


class Counted:
    """Runs one command against the server and counts the requests it made: API and file
    requests, the ones the Hub rate-limits (the LFS transfers, one per new file on either
    side, are left apart)."""

    def __init__(self, hub: HubServer, env: dict[str, str]) -> None:
        self.hub = hub
        self.env = env

    def __call__(self, command: list[str]) -> tuple[Measured, int]:
        before = len(self.hub.request_log)
        measured = run_measured(command, env=self.env)
        if measured.exit_code != 0:
            raise SystemExit(f"{' '.join(command)} exited {measured.exit_code}")
        made = self.hub.request_log[before:]
        return measured, sum(record.kind != "storage" for record in made)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bundles", type=int, default=50, help="bundles in the folder")
    parser.add_argument("--rows", type=int, default=170, help="predictions per bundle")
    parser.add_argument("--json-out", type=Path, default=None)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bundler-bench-upload-"))
    hub = HubServer(tokens={TOKEN: TokenInfo(name="bench", role="write")}).start()
    try:
        env = os.environ | client_env(hub, TOKEN, hf_home=str(workdir / "hf-home"))
        counted = Counted(hub, env)
        text = corpus(size=1 << 20)
        output = workdir / "output"
        for number in range(args.bundles):
            write_own_run(output, args.rows, model=f"bench/model-{number}", text=text)
        bundles = workdir / "bundles"
        collect = [str(BUNDLER), "collect", str(output), "-o", str(bundles)]
        run_measured([*collect, "--expect", f"{TASK}={args.rows}"])
        size = sum(path.stat().st_size for path in bundles.rglob("*.tar.zst"))
        print(f"machine: {machine()}; {args.bundles} bundles, {size / 1e6:.1f} MB", flush=True)
        compile_bytecode()

        fresh = Comparison("upload-fresh", "bundler upload", "hf upload", target_ratio=1.5)
        rerun = Comparison("upload-rerun", "bundler upload", "hf upload")
        requests: dict[str, list[int]] = {
            key: [] for key in ("bundler", "hf", "bundler_re", "hf_re")
        }
        for number in range(args.rounds):
            mine, theirs = f"bench/b-{uuid.uuid4().hex[:8]}", f"bench/h-{uuid.uuid4().hex[:8]}"
            hub.create_repo(mine)  # `bundler upload` never creates one (`bundler init` does)
            upload = [str(BUNDLER), "upload", str(bundles), "--repo", mine]
            hf = [str(HF), "upload", theirs, str(bundles), "--repo-type", "dataset"]
            sides = [("bundler", upload), ("hf", hf)]
            for suffix, comparison in (("", fresh), ("_re", rerun)):
                results: dict[str, tuple[Measured, int]] = {}
                for key, command in sides if number % 2 == 0 else sides[::-1]:
                    results[key] = counted(command)
                    requests[key + suffix].append(results[key][1])
                comparison.subject_seconds.append(results["bundler"][0].seconds)
                comparison.baseline_seconds.append(results["hf"][0].seconds)
                comparison.subject_peak_rss_kib = max(
                    comparison.subject_peak_rss_kib, results["bundler"][0].peak_rss_kib
                )
                print(
                    f"  {comparison.name} round {number + 1}: "
                    f"bundler {results['bundler'][0].seconds:.2f} s / {results['bundler'][1]} "
                    f"requests, hf {results['hf'][0].seconds:.2f} s / {results['hf'][1]} requests",
                    flush=True,
                )
        fresh.extra = {"requests": requests["bundler"][-1], "hf_requests": requests["hf"][-1]}
        rerun.extra = {
            "requests": requests["bundler_re"][-1],
            "hf_requests": requests["hf_re"][-1],
        }
        fresh.extra.update(kept_rows_gain(hub, env, bundles, args.rounds))
        fresh.extra["bundles"] = args.bundles
        fresh.extra["bundles_mb"] = round(size / 1e6, 1)
        fresh.extra["tree_mb"] = round(tree_bytes(output) / 1e6, 1)
        report_figures(args.json_out, [fresh, rerun])
        return 0
    finally:
        hub.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def kept_rows_gain(
    hub: HubServer, env: dict[str, str], bundles: Path, rounds: int
) -> dict[str, object]:
    """Publishing the bundles into fresh repositories with and without the parts' rows kept
    decoded, alternated in one process of the installed venv: the ratio of the medians
    with/without and the per-round spread; nothing for an install without it."""
    repos = [f"bench/k-{uuid.uuid4().hex[:8]}" for _ in range(1 + 2 * rounds)]
    for repo in repos:
        hub.create_repo(repo)
    measured = run_measured(  # -P: the installed bundler, never the one in the working folder
        [str(INSTALLED / "python"), "-P", "-c", KEPT_ROWS_SCRIPT, str(bundles), TOKEN, *repos],
        env=env,
        capture=True,
    )
    if measured.exit_code != 0:  # an install from before the rows were kept
        return {}
    figures = json.loads(measured.stdout)
    kept, decoded = figures["with"], figures["without"]
    ratios = [a / b for a, b in zip(kept, decoded, strict=True)]
    return {
        "kept_rows": round(statistics.median(kept) / statistics.median(decoded), 3),
        "kept_rows_spread": [round(min(ratios), 3), round(max(ratios), 3)],
    }


if __name__ == "__main__":
    raise SystemExit(main())
