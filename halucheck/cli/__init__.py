"""The `halucheck` command line: parse, call, print. Heavy libraries are imported inside commands.

``app.py`` holds the application and the flags several commands share; ``commands.py`` the main job and
its tools; ``evaluate.py`` the commands that measure; ``train.py`` fitting a head; ``output.py`` what they print.
"""

from halucheck.cli import commands, evaluate, train  # noqa: F401 - their commands register on the app
from halucheck.cli.app import EXIT_UNDECIDED, app, main

__all__ = ["EXIT_UNDECIDED", "app", "main"]
