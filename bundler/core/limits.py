"""The limits of the bundle format, in one place: collect refuses what exceeds them, verify
refuses any bundle that does, and the command line checks its options against them.

A module of plain numbers, so the command line can show them in --help without loading the
pipeline (start-up is measured in tests/benchmark_collect.py).
"""

from __future__ import annotations

MAX_EXCEPTION_RATE = 0.05
"""The share of a run's predictions that may have raised an exception in the harness: review
fails a bundle above it unless the maintainer gives another, and collect warns of one above it
(it reads no repository, so it knows only this default)."""

DEFAULT_LEVEL = 3
MAX_LEVEL = 19
"""Levels 20-22 need windows of 32-128 MB that verify would have to hold in memory."""

MAX_RUN_META_BYTES = 256 << 10
MAX_METRICS_BYTES = 1 << 20
MAX_PREDICTION_BYTES = 2 << 20
"""Each file is parsed whole, and parsed JSON can take up to about 85 times its size in memory
(small nested arrays; pydantic holds its own parse beside the Python objects): these keep
collect and verify under about 220 MB on any input (real files are far smaller)."""
MAX_PREDICTIONS = 1_000_000
MAX_CLAIM_BYTES = 256 << 10
"""The manifest less its file list."""
MAX_SIGNATURE_CHARS = 16 << 10
"""An armored SSH signature: far above the largest real one (an rsa-16384 key and signature
armor to about 6 KiB); anything longer is refused before it is decoded."""
MAX_SIDECAR_BYTES = MAX_CLAIM_BYTES + 4096 + 2 * MAX_SIGNATURE_CHARS
"""The claim, the archive's facts and a signature (JSON doubles at most its newlines)."""
MAX_ARCHIVE_BYTES = 8 << 30
"""What download and review fetch of one archive at most: a bundle of the format's largest
prediction count at real sizes is far smaller (100,000 predictions compress to about 92 MB)."""
MAX_LEFT_OUT_SHOWN = 10

MAX_METRICS = 10_000
MAX_METRIC_NAME_CHARS = 1024
MAX_METRIC_NAMES_CHARS = 1 << 20
"""The flattened names (`scorer.key[.sub...]`) of a metrics.json: how many (its leaves), how
long each, and their total length. Every later command builds one name per leaf (inspect's
table, diff, the Hub's row and task columns), and a name repeats every key above it, so a
file within MAX_METRICS_BYTES could otherwise flatten into gigabytes. run_meta.json's key
paths (diff names each differing field by its path) have the same bounds. Real files hold
tens to a few hundred metrics of under 100 characters."""
MAX_USAGE_KEYS = 1000
MAX_USAGE_KEY_CHARS = 256
"""Distinct usage keys over a bundle's predictions, and each key's length: the tally keeps
one total per key, the claim, the Hub's row and inspect one entry per key. Real runs have a
handful (input_tokens, output_tokens, reasoning_tokens)."""

INT64_MAX = 2**63 - 1
"""Counts are published into int64 columns."""
TAR_NUMBER_LIMIT = 8**11
"""A ustar header's numeric fields (size, mtime) hold 11 octal digits."""

MAX_REPO_FILES_SETTING = 1_000_000_000
"""The most files BUNDLER_MAX_REPO_FILES may allow a repository: ten thousand times what the
Hub recommends, so any larger figure is a typo, and checked as text, so that no length of
digits reaches int()."""
MAX_WAIT_SETTING = 100 * 365 * 24 * 3600.0
"""The longest wait BUNDLER_MAX_WAIT may ask for: a century, past which a rate limit's
announced wait counts as unbounded (bundler.hub.client.ratelimit), so no longer one means more.
Checked as text too: float() reads a thousand digits as inf."""

# Files a person names for the bundler to read: each read stops one byte past its bound
# (bundler.local.fileio.read_named_file), so /dev/zero, a FIFO or a growing file cost no more.
MAX_PRIVATE_KEY_BYTES = 64 << 10
"""An OpenSSH key file for `sign --key` and `collect --sign-key` (a private key, or the .pub
of a key in ssh-agent): the largest, an unencrypted rsa-16384 private key, armors to about
15 KiB."""
MAX_PUBLIC_KEY_BYTES = 64 << 10
"""A public key for `signers add`: one line, an rsa-16384 key is about 2.8 KiB of it; the same
bound as the private key, so any key the bundler can sign with can be added."""
MAX_CONFIG_BYTES = 1 << 20
"""A bundler.toml: a handful of tables of options, a few hundred bytes in practice; a
megabyte holds thousands of `expect` entries."""
MAX_PLAYER_CONFIG_BYTES = 1 << 20
"""A GPTNT player config for `export-gptnt`: a short YAML file; anything larger is not one."""
MAX_LOCK_RECORD_BYTES = 4096
"""The bundles folder's lock record (who holds the lock): a pid, a host name, a time and an
operation."""

# Files the bundler reads on a person's behalf, from the Hub or its own caches: each read
# stops one byte past its bound (bundler.hub.client.session.read_file streams the Hub's answer;
# caches through bundler.local.fileio), and a file past it is refused by name (the Hub's) or
# ignored and rebuilt (a cache's).
MAX_TASKS_FILE_BYTES = 1 << 20
"""leaderboard/tasks.json: a few hundred bytes a task; a megabyte is thousands of tasks."""
MAX_SIGNERS_FILE_BYTES = 1 << 20
"""leaderboard/allowed_signers: a line of about 100 bytes a key (rsa-16384 about 2.8 KiB); a
megabyte is thousands of signers."""
MAX_CARD_BYTES = 1 << 20
"""The Hub's answer with a dataset card's metadata (the split sizes that --resolve-rows
reads): far more than any dataset card's YAML header."""
MAX_VERDICT_BYTES = 16 << 20
"""An audit verdict kept for the next run: a sidecar (MAX_SIDECAR_BYTES) and a metrics.json
(MAX_METRICS_BYTES) at most, far less than this."""
MAX_AUDIT_REPORT_BYTES = 64 << 20
"""A shard's audit report read to be merged: about 400 bytes a bundle it audited (its verdict
and its id), so some 150,000 bundles in one shard; one larger is refused unread (run more
shards). A report is downloaded from CI artifacts: it is read as anything else from outside."""
MAX_CACHE_BYTES = 64 << 20
"""A cache file in the bundles folder (collect's and verify's): one larger is ignored, never
loaded, so a huge or hostile file there cannot blow the memory; a cache that would be larger
is not written. About 300 bytes a bundle: 200,000 bundles."""

FIFO_WRITER_WAIT_SECONDS = 5
"""How long a FIFO the person named (`--key ./fifo`) is waited on for its writer to open it:
`--key <(pass show key)` hands over a pipe whose writer is already there, and a helper
process that opens a named FIFO does so at once; a FIFO nobody opens is refused after this
wait rather than waited on for ever, or read as empty (which would be a race with a writer
that is merely slow to start)."""
