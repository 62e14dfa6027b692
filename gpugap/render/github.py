"""GitHub Actions workflow commands: an annotation per failed gate and per warning.

Printed only when ``GITHUB_ACTIONS=true``; they show on the run's summary page and in the
pull request. Data and properties are escaped the way actions/toolkit escapes them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from gpugap.ci.gates import Check
from gpugap.text import MESSAGE_LIMIT, safe_text

if TYPE_CHECKING:
    from gpugap.render.outputs import View


def in_github_actions(env: Mapping[str, str] | None = None) -> bool:
    return (os.environ if env is None else env).get("GITHUB_ACTIONS") == "true"


def step_summary(env: Mapping[str, str] | None = None) -> Path | None:
    """The job summary file GitHub Actions gives each step, when there is one."""
    path = (os.environ if env is None else env).get("GITHUB_STEP_SUMMARY")
    return Path(path) if path else None


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(kind: str, message: str, **properties: str) -> str:
    """``::kind key=value,...::message``, escaped."""
    props = ",".join(f"{k}={escape_property(v)}" for k, v in properties.items())
    return f"::{kind}{' ' + props if props else ''}::{escape_data(message)}"


def check_annotations(check: Check, view: View | None = None) -> list[str]:
    # Report-derived text made safe first (no escape sequences in the log), then escaped.
    lines = [command("error", safe_text(r.message, MESSAGE_LIMIT),
                     title=f"gpugap check failed: {safe_text(r.name)}")
             for r in check.results if r.failed]
    lines += [command("warning", safe_text(w, MESSAGE_LIMIT), title="gpugap check")
              for report in check.reports for w in report.warnings]
    return lines


__all__ = ["check_annotations", "command", "escape_data", "escape_property",
           "in_github_actions", "step_summary"]
