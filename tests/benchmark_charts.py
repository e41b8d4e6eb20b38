"""Benchmark: drawing the leaderboard's charts (`bundler.hub.leaderboard.chart`).

A script, not a test (the suite runs it once as a smoke test). Each round is a fresh
interpreter, as a bundler command is: it imports matplotlib, then draws --charts charts of a
proportion task of --entries entries (the top 20 with their intervals, some partial, some
stale), each a different board. It prints, over the rounds, the median and the spread (lowest
to highest) of the import, of the first chart (which loads the font) and of every later chart,
and the largest peak RSS of a round. The target: at most 1 s a chart.

    .venv/bin/python tests/benchmark_charts.py --rounds 7 --json-out /tmp/charts.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from benchlib import machine

TARGET_SECONDS = 1.0

ROUND = """
import json, resource, sys, time
sys.path.insert(0, sys.argv[1])
from factory import make_row
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.tasks.definitions import TaskDefinition

charts, entries = int(sys.argv[2]), int(sys.argv[3])
definition = TaskDefinition(
    hf_repo_id="GPTNT/expert-VQA", split="test", metric="em.acc", metric_kind="proportion",
    revisions=["ffeeddccbbaa99887766554433221100ffeeddcc"],
)

def board(number):
    rows = []
    for i in range(entries):
        fields = {"rows_present": 40 + 37 * i, "expected_rows": 40 + 37 * i}
        if i % 7 == 3:
            fields |= {"expected_rows": 1000 + 37 * i, "coverage": "partial"}
        if i % 5 != 4:
            fields["resolved_revision"] = definition.revisions[0]
        score = ((i + number) * 37 % 101) / 101
        rows.append(make_row(f"model-{i:04d}", metrics={"em": {"acc": score}}, **fields))
    return TaskBoard.of(f"task-{number}", rows, definition)

boards = [board(number) for number in range(charts)]
started = time.perf_counter()
from bundler.hub.leaderboard.chart import chart_png, charts_available
assert charts_available()
imported = time.perf_counter() - started
seconds, sizes = [], []
for each in boards:
    started = time.perf_counter()
    sizes.append(len(chart_png(each)))
    seconds.append(time.perf_counter() - started)
print(json.dumps({
    "import": imported,
    "first": seconds[0],
    "later": seconds[1:],
    "png_bytes": max(sizes),
    "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
}))
"""


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "low": min(values), "high": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--charts", type=int, default=10, help="charts drawn per round")
    parser.add_argument("--entries", type=int, default=200, help="entries per board")
    parser.add_argument("--json-out", type=Path)
    options = parser.parse_args()
    rounds = []
    for number in range(options.rounds):
        sizes = [str(options.charts), str(options.entries)]
        done = subprocess.run(
            [sys.executable, "-c", ROUND, str(Path(__file__).parent), *sizes],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"round {number + 1} failed: {done.stderr[-2000:]}")
        rounds.append(json.loads(done.stdout))
        print(
            f"  round {number + 1}: import {rounds[-1]['import']:.3f} s, "
            f"first chart {rounds[-1]['first']:.3f} s",
            flush=True,
        )
    later = [seconds for measured in rounds for seconds in measured["later"]]
    figures = {
        "machine": machine(),
        "charts_per_round": options.charts,
        "entries": options.entries,
        "import_seconds": spread([measured["import"] for measured in rounds]),
        "first_chart_seconds": spread([measured["first"] for measured in rounds]),
        "later_chart_seconds": spread(later) if later else None,
        "png_bytes": max(measured["png_bytes"] for measured in rounds),
        "peak_rss_kib": max(measured["peak_rss_kib"] for measured in rounds),
    }
    slowest = max(figures["first_chart_seconds"]["high"], max(later, default=0.0))
    figures["target_met"] = slowest <= TARGET_SECONDS
    for name in ("import_seconds", "first_chart_seconds", "later_chart_seconds"):
        if figures[name] is not None:
            f = figures[name]
            print(f"{name}: median {f['median']:.3f}, spread {f['low']:.3f}-{f['high']:.3f}")
    print(
        f"png up to {figures['png_bytes']} bytes, peak RSS {figures['peak_rss_kib'] / 1024:.0f}"
        f" MiB; slowest chart {slowest:.3f} s (target <= {TARGET_SECONDS} s): "
        f"{'met' if figures['target_met'] else 'NOT met'}"
    )
    if options.json_out is not None:
        options.json_out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
