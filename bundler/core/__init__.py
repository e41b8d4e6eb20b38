"""The shared core: errors and exit codes, limits, naming, the base model, progress reporting.

Everything else stands on it, and it imports nothing of the bundler's beyond itself: no bundle
format, no Hub client, no terminal.
"""
