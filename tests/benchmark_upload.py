"""Benchmark: `bundler upload` against `hf upload` of the same folder, on the local Hub server.

A script, not a test (the suite runs it once at a tiny size as a smoke test). It starts the
test suite's Hub-compatible server on 127.0.0.1, collects --bundles runs into bundles, then
alternates rounds of
- `bundler upload BUNDLES --repo R1` into a fresh repository, and
- `hf upload R2 BUNDLES --repo-type dataset` into another fresh repository,
counting wall time and the API and file requests each made (LFS transfers apart); then the
same again into the now populated repositories (a re-run with nothing new). It prints medians,
the ratio of medians, the spread, request counts and peak RSS.

The fresh upload is also alternated with a floor (FLOOR_SCRIPT): `hf upload` of the same folder
in an interpreter that has first loaded the libraries the bundler's upload cannot do without and
hf's does not load (pyarrow for the parquet tables, pydantic for the models at every boundary,
jinja2 for the card, rich and typer for the command line). The distance from hf to that floor is
what loading them costs on this machine; the distance from the floor to the bundler, what is the
bundler's own.

The fresh row also measures what the upload's mechanisms gain (--mechanism-rounds rounds): in
one process of the installed venv, publishing the same bundles into fresh repositories
alternates with every mechanism and without each in turn, and the row's `extra` gets the ratio
of medians with/without and each round's ratio: the parts' rows kept decoded (`kept_rows`,
bundler/hub/leaderboard/partrows.py) and the last commit taking what was computed ahead
(`computed_ahead`, bundler/hub/publish/holdings.py); and, in whole uploads through the console
script's `main` where the installed venv has pandas, pandas left out (`pandas_left_out`).

    .venv/bin/python tests/benchmark_upload.py --rounds 5 --json-out /tmp/upload.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from benchlib import (
    BUNDLER,
    FLOOR_PRELUDE,
    HF,
    INSTALLED,
    PANDAS_LET_IN,
    Comparison,
    Measured,
    add_mechanism_rounds,
    compile_bytecode,
    machine,
    mechanism_gain,
    pandas_installed,
    report_figures,
    rounds_of_mechanisms,
    run_measured,
    tree_bytes,
    with_and_without,
)
from benchmark_collect import TASK, corpus, write_own_run
from hubserver import HubServer, TokenInfo, client_env

TOKEN = "hf_BenchmarkWriteToken0123456789abcdef"
GAINS_SCRIPT = """
import json, sys, time
from pathlib import Path
from bundler.core.progress import NoProgress
from bundler.hub.leaderboard import partrows
from bundler.hub.publish import holdings
from bundler.hub.publish.publisher import Publisher
from bundler.hub.publish.upload import UploadOptions, gather_local

bundles, token, (warm, *repos) = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
local, set_aside = gather_local(bundles, allow_partial=False, progress=NoProgress())
kept, taking = partrows.KEPT.size, holdings.Holdings.table_operations


def computing_again(self, todo, **options):  # the last commit never takes what was computed ahead
    self._next = None
    return taking(self, todo, **options)


def publish(repo, without=None):
    partrows.KEPT.size = 0 if without == "kept_rows" else kept
    holdings.Holdings.table_operations = computing_again if without == "ahead" else taking
    started = time.perf_counter()
    report = Publisher(UploadOptions(repo_id=repo, token=token)).run(list(local), set_aside)
    if report.exit_code != 0:
        raise SystemExit(f"{repo}: {report.error}")
    return time.perf_counter() - started


publish(warm)  # imports, the card's template and the page cache, before anything is timed
sides = [None, "kept_rows", "ahead"]
figures = {str(side): [] for side in sides}
for number, trio in enumerate(zip(repos[::3], repos[1::3], repos[2::3])):
    order = sides[number % 3 :] + sides[: number % 3]
    for side, repo in zip(order, trio):
        figures[str(side)].append(publish(repo, side))
print(json.dumps(figures))
"""


FLOOR_LIBRARIES = ("pyarrow.parquet", "pyarrow.compute", "pydantic.main", "jinja2", "rich.console")
FLOOR_SCRIPT = f"""{FLOOR_PRELUDE}
import os, sys
import typer, {", ".join(FLOOR_LIBRARIES)}
from huggingface_hub.cli.hf import main
sys.argv[0] = "hf"
try:
    code = main()
except SystemExit as ending:
    code = ending.code
sys.stdout.flush(), sys.stderr.flush()
os._exit(code if isinstance(code, int) else 0 if code is None else 1)
"""
"""`hf upload` (its console script's `main`, given the arguments after `-c`) once the libraries
the bundler's upload loads beyond hf's own are loaded: the least an upload in Python that writes
parquet tables, validates with pydantic and renders a Jinja card must load. It runs as the
bundler's console script does (FLOOR_PRELUDE, and an end without the native libraries'
teardown), so what those save is not charged to the floor; typer's adapters (the pydantic
TypeAdapters typer builds for each parameter) are left out. Both choices make the floor err
low."""


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
    add_mechanism_rounds(parser)
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
        floor = Comparison(
            "upload-fresh-floor", "bundler upload", "hf upload, the bundler's libraries loaded"
        )
        rerun = Comparison("upload-rerun", "bundler upload", "hf upload")
        requests: dict[str, list[int]] = {
            key: [] for key in ("bundler", "hf", "floor", "bundler_re", "hf_re")
        }
        for number in range(args.rounds):
            mine, theirs, floored = (f"bench/{side}-{uuid.uuid4().hex[:8]}" for side in "bhf")
            hub.create_repo(mine)  # `bundler upload` never creates one (`bundler init` does)
            upload = [str(BUNDLER), "upload", str(bundles), "--repo", mine]
            hf = [str(HF), "upload", theirs, str(bundles), "--repo-type", "dataset"]
            on_floor = [str(INSTALLED / "python"), "-P", "-c", FLOOR_SCRIPT, *hf[1:]]
            on_floor[on_floor.index(theirs)] = floored
            sides = [("bundler", upload), ("hf", hf), ("floor", on_floor)]
            for suffix, comparison in (("", fresh), ("_re", rerun)):
                if suffix:  # the re-run: bundler and hf, swapping which goes first
                    ordered = sides[:2] if number % 2 == 0 else sides[1::-1]
                else:  # the fresh upload: each of the three goes first in turn
                    ordered = sides[number % 3 :] + sides[: number % 3]
                results: dict[str, tuple[Measured, int]] = {}
                for key, command in ordered:
                    results[key] = counted(command)
                    requests[key + suffix].append(results[key][1])
                comparisons = [(comparison, "hf")] + ([(floor, "floor")] if not suffix else [])
                for each, baseline in comparisons:
                    each.subject_seconds.append(results["bundler"][0].seconds)
                    each.baseline_seconds.append(results[baseline][0].seconds)
                    each.subject_peak_rss_kib = max(
                        each.subject_peak_rss_kib, results["bundler"][0].peak_rss_kib
                    )
                print(
                    f"  {comparison.name} round {number + 1}: "
                    + ", ".join(
                        f"{key} {seconds.seconds:.2f} s / {made} requests"
                        for key, (seconds, made) in results.items()
                    ),
                    flush=True,
                )
        fresh.extra = {"requests": requests["bundler"][-1], "hf_requests": requests["hf"][-1]}
        rerun.extra = {
            "requests": requests["bundler_re"][-1],
            "hf_requests": requests["hf_re"][-1],
        }
        fresh.extra.update(mechanism_gains(hub, env, bundles, rounds_of_mechanisms(args)))
        floor.extra = {"floor_requests": requests["floor"][-1]}
        for each in (fresh, floor):
            each.extra["bundles"] = args.bundles
            each.extra["bundles_mb"] = round(size / 1e6, 1)
        fresh.extra["tree_mb"] = round(tree_bytes(output) / 1e6, 1)
        report_figures(args.json_out, [fresh, floor, rerun])
        return 0
    finally:
        hub.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def mechanism_gains(
    hub: HubServer, env: dict[str, str], bundles: Path, rounds: int
) -> dict[str, object]:
    """Publishing the bundles into fresh repositories with every mechanism, and without each
    in turn, alternated in one process of the installed venv: the parts' rows kept decoded
    (bundler/hub/leaderboard/partrows.py, `kept_rows`) and the last commit taking what was
    computed ahead (bundler/hub/publish/holdings.py, `computed_ahead`); and, in whole uploads
    (benchlib.mechanism_gain) where the installed venv has pandas, pandas left out
    (`pandas_left_out`). For each, the ratio of the medians with/without and each round's
    ratio; nothing for an install without them."""
    repos = [f"bench/g-{uuid.uuid4().hex[:8]}" for _ in range(1 + 3 * rounds)]
    for repo in repos:
        hub.create_repo(repo)
    measured = run_measured(  # -P: the installed bundler, never the one in the working folder
        [str(INSTALLED / "python"), "-P", "-c", GAINS_SCRIPT, str(bundles), TOKEN, *repos],
        env=env,
        capture=True,
    )
    if measured.exit_code != 0:  # an install from before these mechanisms
        return {}
    figures = json.loads(measured.stdout)
    gains: dict[str, object] = {}
    for name, without in (("kept_rows", "kept_rows"), ("computed_ahead", "ahead")):
        gains |= with_and_without(name, figures["None"], figures[without])

    def into_a_fresh_repository() -> list[str]:
        repo = f"bench/v-{uuid.uuid4().hex[:8]}"
        hub.create_repo(repo)
        return ["upload", str(bundles), "--repo", repo]

    if pandas_installed():
        gains |= mechanism_gain(
            "pandas_left_out", into_a_fresh_repository, PANDAS_LET_IN, rounds, env
        )
    return gains


if __name__ == "__main__":
    raise SystemExit(main())
