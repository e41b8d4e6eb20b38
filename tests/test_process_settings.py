"""The library does not tune the process it runs in: settings that hold for a whole process
(the garbage collector, the environment, signal handlers, warning filters, the recursion limit,
the locale) are the console script's to make (bundler.cli.app.main), never a side effect of
importing or calling the library, which a program embedding it would inherit."""

from __future__ import annotations

import json

from factory import DEFAULT_SHA, make_row
from helpers import run_python

SETTINGS = """
import gc, json, locale, os, signal, sys, warnings

def settings():
    return {
        "gc_enabled": gc.isenabled(),
        "gc_threshold": list(gc.get_threshold()),
        "gc_frozen": gc.get_freeze_count(),
        "environ": dict(os.environ),
        "signals": {s.name: repr(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM)},
        "warning_filters": [repr(f) for f in warnings.filters],
        "recursion_limit": sys.getrecursionlimit(),
        "locale": locale.setlocale(locale.LC_ALL),
    }
"""

DRAW = (
    SETTINGS
    + """
# what the bundler loads of others' (numpy adds warning filters when imported: its own doing)
import matplotlib.backends.backend_agg, matplotlib.figure, numpy, pyarrow, pydantic
gc.set_threshold(100, 10, 10)  # the program's own setting, which must stand
before = settings()
import bundler
from bundler.hub.leaderboard.chart import chart_png
from bundler.hub.leaderboard.ranking import TaskBoard
from bundler.hub.leaderboard.rows import TableRow
from bundler.hub.tasks.definitions import TaskDefinition

rows = [TableRow.model_validate(row) for row in json.loads(sys.argv[1])]
board = TaskBoard.of("expert-vqa", rows, TaskDefinition.model_validate_json(sys.argv[2]))
chart_png(board)  # the first chart loads matplotlib and its font
collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(1))
png = chart_png(board)
gc.callbacks.clear()
print(json.dumps({
    "before": before,
    "after": settings(),
    "png": png is not None,
    "collections_while_drawing": len(collections),
}))
"""
)


def test_drawing_a_chart_leaves_the_process_settings_as_they_were() -> None:
    from bundler.hub.tasks.definitions import TaskDefinition

    rows = [make_row(f"model-{n}", metrics={"em": {"acc": n / 10}}) for n in range(8)]
    definition = TaskDefinition(
        hf_repo_id=rows[0].hf_repo_id,
        split="test",
        metric="em.acc",
        metric_kind="proportion",
        revisions=[DEFAULT_SHA],
    )
    result = run_python(
        DRAW,
        json.dumps([row.model_dump(mode="json") for row in rows]),
        definition.model_dump_json(),
    )
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["png"]
    assert outcome["after"] == outcome["before"]
    assert outcome["after"]["gc_enabled"] and outcome["after"]["gc_threshold"] == [100, 10, 10]
    # the collector ran as the program set it while the chart was drawn, not just once after
    assert outcome["collections_while_drawing"] > 1
