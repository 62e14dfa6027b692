"""The output formats, each registered once: its name (the option is ``--NAME``), the help
of that option, what it renders, where it goes, and its render function.

A format renders one or more *subjects*, the results gpugap's commands produce:

  analysis   an Analysis of one report (``gpugap analyze R``)
  job        several reports grouped into jobs, a gpugap.analysis.job.Jobs (``gpugap
             analyze R1 R2 ...``: the job view)
  check      a gpugap.ci.gates.Check (``gpugap check``)
  diff       a gpugap.ci.diff.Diff (``gpugap diff``)

Every render function has one shape, ``render(result, view) -> str | bytes | list[str]``:
*result* is the subject's value, *view* (:class:`View`) what else a format may need (the
trace, the range, the severity floor) and a memo that formats drawing the same thing
share (the timeline's panels, its SVG). Functions are named as ``"module:function"`` and
imported when first used, so that registering a format costs no import and the analyze
path loads no renderer it was not asked for.

Where a format goes (its *target*):

  STDOUT   one document on standard output, in place of the terminal view (--json)
  FILE     the file its option names; with *default_file*, a file found when the option
           is not given (GitHub's job summary), appended to
  LINES    lines on standard output (standard error when a STDOUT format holds it),
           only when its *active* predicate says so (GitHub annotations)

The command line (gpugap.cli.outputs) turns this table into options: every command
that renders a subject offers every format registered for it, and writes them all
through one path (gpugap.files: never an input, no replacing without --force, a failed
write never exit 0).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpugap.report.trace import Trace
    from gpugap.rules.model import Severity

ANALYSIS, JOB, CHECK, DIFF = "analysis", "job", "check", "diff"
SUBJECTS = (ANALYSIS, JOB, CHECK, DIFF)

STDOUT, FILE, LINES = "stdout", "file", "lines"
TARGETS = (STDOUT, FILE, LINES)

Rendered = str | bytes | list[str]


def resolve(spec: str) -> Callable[..., Any]:
    """The function a ``"package.module:function"`` names, its module imported now."""
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Format:
    """One output format. *renders* maps each subject it renders to its render function
    (``"module:function"``, see the module's docstring)."""

    name: str
    help: str
    target: str
    renders: Mapping[str, str]
    metavar: str = "FILE"
    needs: str | None = None           # "module:function" run before any work (chromium)
    default_file: str | None = None    # "module:function" -> Path | None, when not given
    active: str | None = None          # LINES: "module:function" -> bool
    says_size: bool = False            # "wrote PATH (N KiB)": large files
    timeline: bool = False             # draws the report's timeline (View.max_events)

    def __post_init__(self) -> None:
        if self.target not in TARGETS:
            raise ValueError(f"format {self.name}: target must be one of {TARGETS}")
        unknown = set(self.renders) - set(SUBJECTS)
        if unknown or not self.renders:
            raise ValueError(f"format {self.name}: renders subjects of {SUBJECTS}, "
                             f"not {sorted(unknown)}")
        if (self.target == LINES) != (self.active is not None):
            raise ValueError(f"format {self.name}: LINES formats, and only they, take "
                             "an active predicate")

    @property
    def flag(self) -> str | None:
        """Its command-line option; LINES formats have none (they follow *active*)."""
        return None if self.target == LINES else f"--{self.name}"

    def render(self, subject: str, result: Any, view: View) -> Rendered:
        return resolve(self.renders[subject])(result, view)


@dataclass
class View:
    """What a render function gets besides its result: the loaded trace (the timeline
    formats draw it), the NVTX range asked for, the severity floor of findings shown,
    the timeline's event budget (None: gpugap.render.timeline's default), and a memo."""

    trace: Trace | None = None
    range_name: str | None = None
    min_severity: Severity | None = None
    max_events: int | None = None
    memo: dict[str, Any] = field(default_factory=dict)

    def once(self, key: str, make: Callable[[], Any]) -> Any:
        """make(), computed once per view: what several formats share."""
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]


FORMATS: dict[str, Format] = {}


def register(fmt: Format) -> Format:
    """Add *fmt* to the formats every command offers for the subjects it renders."""
    if fmt.name in FORMATS:
        raise ValueError(f"output format {fmt.name} is registered already")
    FORMATS[fmt.name] = fmt
    return fmt


def formats(subjects: Iterable[str]) -> list[Format]:
    """The formats that render any of *subjects*, in the order registered."""
    wanted = set(subjects)
    return [f for f in FORMATS.values() if wanted & set(f.renders)]


register(Format(
    "json", "print one JSON document to stdout", STDOUT,
    renders={ANALYSIS: "gpugap.render.documents:analysis_json",
             JOB: "gpugap.render.documents:jobs_json",
             CHECK: "gpugap.render.documents:check_json",
             DIFF: "gpugap.render.documents:diff_json"}))
register(Format(
    "junit", "write JUnit XML here (one test case per gate)", FILE,
    renders={CHECK: "gpugap.render.junit:check_junit"}))
register(Format(
    "markdown", "write a Markdown summary here (default under GitHub Actions: append it "
                "to $GITHUB_STEP_SUMMARY)", FILE,
    renders={ANALYSIS: "gpugap.render.markdown:analysis_markdown",
             CHECK: "gpugap.render.markdown:check_markdown",
             DIFF: "gpugap.render.markdown:diff_markdown"},
    default_file="gpugap.render.github:step_summary"))
register(Format(
    "github", "GitHub Actions annotations: one per failed gate and per warning", LINES,
    renders={CHECK: "gpugap.render.github:check_annotations"},
    active="gpugap.render.github:in_github_actions"))
register(Format(
    "html", "write a self-contained HTML timeline with the findings drawn on it", FILE,
    renders={ANALYSIS: "gpugap.render.html:analysis_html"}, says_size=True, timeline=True))
register(Format(
    "svg", "write a static SVG of the timeline (the --range window, else a few steady "
           "iterations)", FILE,
    renders={ANALYSIS: "gpugap.render.timeline_svg:analysis_svg"}, says_size=True,
    timeline=True))
register(Format(
    "png", "write that SVG as PNG (needs chromium)", FILE,
    renders={ANALYSIS: "gpugap.render.timeline_svg:analysis_png"},
    needs="gpugap.render.timeline_svg:find_chromium", says_size=True, timeline=True))


__all__ = ["ANALYSIS", "CHECK", "DIFF", "FILE", "FORMATS", "JOB", "LINES", "STDOUT",
           "SUBJECTS", "Format", "Rendered", "View", "formats", "register", "resolve"]
