"""The leaderboard: what the dataset viewer and the card show of the published bundles.

`rows` derives each bundle's row, `ranking` ranks a task's bundles (`TaskBoard`), `tables`
writes and reads the Parquet tables (`tablecache` keeps a local copy of the all-tasks one),
`card` renders the dataset card, `branch` brings a branch's tables up to date with its bundles
and says what a commit writes to keep them and the card true, and `card_refresh` is
`bundler card`. It stands on the Hub client, the repository's files, the task definitions, the
local bundle format and the core; never on publishing or review, which stand on it.
"""
