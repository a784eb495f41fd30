"""The command-line interface: click commands that parse, call the library, and print.

Nothing outside this package imports click. Modules here import the library lazily,
inside the commands, so that `trainops --help` stays fast.
"""
