"""Help that shows each option's default, shared by the command-line faces.

argparse's ArgumentDefaultsHelpFormatter prints "(default: None)" after every option without a
default, which reads as if None were a value to give; this one shows a default only where there is
one to show, so a reader sees at a glance what an option does when left out. Standard library only:
`--help` must answer without loading the planner.
"""

from __future__ import annotations

import argparse


class DefaultsFormatter(argparse.HelpFormatter):
    """`(default: X)` after an option's help, unless it has no default, is a flag, or its help names it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if ("%(default)" in text or "default" in text.lower() or not action.option_strings
                or action.default in (None, False, argparse.SUPPRESS) or action.default == []):
            return text
        return f"{text} (default: %(default)s)"
