"""The command line: the typer app, one module per group of commands, rendering, progress bars.

The only importer of typer and rich. A command parses its options, calls the library and
renders the result; it holds no domain logic.
"""
