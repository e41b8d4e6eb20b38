"""The leaderboard: what the dataset viewer and the card show of the published bundles.

`rows` derives each bundle's row, `ranking` ranks a task's bundles (`TaskBoard`), `tables`
writes and reads the Parquet tables (`tablecache` keeps a local copy of the all-tasks one),
`card` renders the dataset card, `branch` brings a branch's tables up to date with its bundles
and says what a commit writes to keep them and the card true (the maintainers' commands that
make those commits live in bundler.hub.maintain). It stands on the Hub client, the
repository's files, the task definitions, the local bundle format and the core; never on
publishing, review or the maintainers' commands, which stand on it.
"""
