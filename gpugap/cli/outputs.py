"""The output options of ``analyze`` (and its job view), ``check`` and ``diff``, made
from the registered formats (gpugap.render.outputs), and the one path that writes them.

A command decorated with :func:`output_options` declares one parameter, ``outputs``;
in its place the command line shows one option per format registered for the
command's subjects (``--json``, ``--junit``, ``--html``...) and ``--force``, and the
command receives them bundled as an :class:`Outputs`. The options are made each time
the command line is built, so a format registered in-process is offered too.

:meth:`Outputs.check` runs before any work (gpugap.files.validate_outputs: never an
input, no replacing without --force; what a format needs, such as chromium);
:meth:`Outputs.write` renders and writes every format asked for: files through
gpugap.files.write_atomic (a failed write is an error, never exit 0), one document on
standard output in place of the terminal view, annotation lines.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpugap.errors import UsageError
from gpugap.render.outputs import (
    FILE,
    LINES,
    STDOUT,
    Format,
    Rendered,
    View,
    formats,
    resolve,
)
from gpugap.text import MESSAGE_LIMIT, safe_text

if TYPE_CHECKING:
    from rich.console import Console

FORCE_HELP = "overwrite existing {flags} files"     # the default: the files it covers


def option(fmt: Format) -> Any:
    """The typer option of *fmt* (an Annotated type; STDOUT formats are switches)."""
    if fmt.target == STDOUT:
        return Annotated[bool, typer.Option(fmt.flag, help=fmt.help)]
    return Annotated[Path | None, typer.Option(fmt.flag, help=fmt.help,
                                               metavar=fmt.metavar)]


def _parameter(fmt: Format) -> str:
    return fmt.name.replace("-", "_") + "_output"


def print_document(text: str) -> None:
    """One document on standard output, as plain text (rich would re-scan a large one
    for nothing)."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


@dataclass
class Outputs:
    """The output options a command was given: the value of each format's option (a
    path, or True for a STDOUT format), and --force."""

    subjects: tuple[str, ...]
    given: dict[str, Any] = field(default_factory=dict)
    force: bool = False

    def offered(self, subject: str) -> list[Format]:
        return [f for f in formats([subject]) if f.name in self.given or f.flag is None]

    def asked(self, subject: str) -> list[Format]:
        """The formats of *subject* whose option was given."""
        return [f for f in self.offered(subject) if self.given.get(f.name)]

    def document(self, subject: str) -> Format | None:
        """The STDOUT format asked for (--json), which replaces the terminal view."""
        return next((f for f in self.asked(subject) if f.target == STDOUT), None)

    def refuse(self, subject: str, why: str) -> None:
        """UsageError for the first option given that *subject* has no format of (the
        job view has no --html): '--html {why}'."""
        for fmt in formats(self.subjects):
            if self.given.get(fmt.name) and subject not in fmt.renders:
                raise UsageError(f"{fmt.flag} {why}")

    def check(self, subject: str, inputs: Sequence[Path | None]) -> None:
        """Before any work: every file option against the inputs and the rules of
        gpugap.files, what each format asked for needs (chromium for --png), and the
        default file of a format not asked for (GitHub's job summary)."""
        from gpugap.files import check_appendable, validate_outputs

        files = [f for f in self.offered(subject) if f.target == FILE]
        validate_outputs([(f.flag or f.name, self.given.get(f.name)) for f in files],
                         inputs, force=self.force)
        for fmt in self.asked(subject):
            if fmt.needs is not None:
                resolve(fmt.needs)()
        for fmt in files:
            if fmt.default_file is not None and not self.given.get(fmt.name):
                default = resolve(fmt.default_file)()
                if default is not None:
                    check_appendable(default, inputs)

    def write(self, subject: str, result: Any, view: View, *, inputs: Sequence[Path | None],
              terminal: Callable[[], None], console: Console, errors: Console,
              files_last: bool = False,
              drawing: AbstractContextManager[Any] | None = None) -> None:
        """Every format asked for: the files (checked before with :meth:`check`; under
        *drawing*, last when *files_last*), then the document on standard output or else
        *terminal* (the terminal view), then annotation lines (GitHub's workflow commands
        work on either stream: to *errors* when standard output holds a document, so
        that it stays parseable).

        Standard output closed early (``| head -1``, quitting ``less``) stops what goes
        there, not the files: they are written whole, each said on *errors* ('wrote
        F'), and then the closed pipe goes on up (exit 141)."""
        if not files_last:
            self._write_files(subject, result, view, inputs, errors, drawing)
        document = self.document(subject)
        try:
            if document is not None:
                text = _data(document, document.render(subject, result, view))
                print_document(text if isinstance(text, str) else text.decode())
            else:
                terminal()
        except (BrokenPipeError, SystemExit) as exc:
            # rich meets a closed stdout with exit(1), the closed pipe its context.
            if not isinstance(exc, BrokenPipeError) \
                    and not isinstance(exc.__context__, BrokenPipeError):
                raise
            if files_last:
                self._write_files(subject, result, view, inputs, errors, drawing,
                                  pipe_closed=True)
            raise
        if files_last:
            self._write_files(subject, result, view, inputs, errors, drawing)
        for fmt in self.offered(subject):
            if fmt.target == LINES and fmt.active is not None and resolve(fmt.active)():
                for line in fmt.render(subject, result, view):
                    (errors if document is not None else console).out(line, highlight=False)

    def _write_files(self, subject: str, result: Any, view: View,
                     inputs: Sequence[Path | None], errors: Console,
                     drawing: AbstractContextManager[Any] | None,
                     pipe_closed: bool = False) -> None:
        from gpugap.files import append_text, write_atomic

        files = [f for f in self.offered(subject) if f.target == FILE]
        if drawing is None or not any(self.given.get(f.name) for f in files):
            drawing = nullcontext()
        if pipe_closed and any(self.given.get(f.name) for f in files):
            errors.print("gpugap: standard output was closed early; writing the files "
                         "asked for", markup=False, highlight=False, soft_wrap=True)
        with drawing:
            for fmt in files:
                path = self.given.get(fmt.name)
                if path is not None:
                    write_atomic(path, _data(fmt, fmt.render(subject, result, view)),
                                 force=self.force)
                    errors.print(wrote_line(path, fmt), markup=False, highlight=False,
                                 soft_wrap=True)
                elif fmt.default_file is not None:
                    default = resolve(fmt.default_file)()
                    if default is not None:
                        text = _data(fmt, fmt.render(subject, result, view))
                        if isinstance(text, bytes):
                            raise TypeError(f"{fmt.name}: a default file takes text")
                        append_text(default, text + "\n", inputs)


def _data(fmt: Format, rendered: Rendered) -> str | bytes:
    """What a FILE or STDOUT format rendered: text or bytes, never lines."""
    if isinstance(rendered, list):
        raise TypeError(f"format {fmt.name} renders lines; only a LINES format may")
    return rendered


def wrote_line(path: Path, fmt: Format) -> str:
    """'wrote PATH', with its size for the large files (the timeline's)."""
    if fmt.says_size:
        return safe_text(f"wrote {path} ({path.stat().st_size / 1024:,.0f} KiB)", None)
    return f"wrote {safe_text(path, MESSAGE_LIMIT)}"


# The default of a command's outputs parameter, which output_options replaces with the
# options themselves (a default, so that it may follow options with theirs).
OUTPUT_OPTIONS: Any = None


class _WithOutputs:
    """A command whose ``outputs`` parameter stands for the options of the formats of
    its subjects: typer reads :attr:`__signature__`, made from the registry whenever
    the command line is built; a call gets those options bundled as :class:`Outputs`."""

    def __init__(self, command: Callable[..., Any], subjects: tuple[str, ...],
                 force_help: str) -> None:
        functools.update_wrapper(self, command, updated=(),
                                 assigned=("__module__", "__name__", "__qualname__",
                                           "__doc__"))
        self._command = command
        self._subjects = subjects
        self._force_help = force_help
        self._signature = inspect.signature(command, eval_str=True)
        if "outputs" not in self._signature.parameters:
            raise TypeError(f"{command.__name__} has no outputs parameter")
        self._built: tuple[list[Format], inspect.Signature] | None = None

    def _formats(self) -> list[Format]:
        return [f for f in formats(self._subjects) if f.flag is not None]

    @property
    def __signature__(self) -> inspect.Signature:
        # typer reads it several times as it builds the command line: made again only
        # when the formats offered have changed.
        offered = self._formats()
        if self._built is not None and self._built[0] == offered:
            return self._built[1]
        kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
        files = "/".join(f.flag or "" for f in offered if f.target == FILE)
        force = Annotated[bool, typer.Option(
            "--force", help=self._force_help.format(flags=files))]
        made = [inspect.Parameter(_parameter(f), kind, annotation=option(f),
                                  default=False if f.target == STDOUT else None)
                for f in offered]
        made.append(inspect.Parameter("force", kind, annotation=force, default=False))
        params: list[inspect.Parameter] = []
        for p in self._signature.parameters.values():
            params.extend(made if p.name == "outputs" else [p])
        signature = self._signature.replace(parameters=params)
        self._built = (offered, signature)
        return signature

    @property
    def __annotations__(self) -> dict[str, Any]:      # type: ignore[override]
        signature = self.__signature__
        return {**{p.name: p.annotation for p in signature.parameters.values()},
                "return": signature.return_annotation}

    def __call__(self, **kwargs: Any) -> Any:
        given = {f.name: kwargs.pop(_parameter(f)) for f in self._formats()}
        kwargs["outputs"] = Outputs(self._subjects, given, force=kwargs.pop("force"))
        return self._command(**kwargs)


def output_options(*subjects: str, force_help: str = FORCE_HELP
                   ) -> Callable[[Callable[..., Any]], Any]:
    """Decorate a command (under ``@app.command``) whose ``outputs: Outputs`` parameter
    becomes the options of every format registered for *subjects*, then ``--force``
    (*force_help*; ``{flags}``: the file options, '--html/--svg/--png')."""
    def wrap(command: Callable[..., Any]) -> Any:
        return _WithOutputs(command, subjects, force_help)
    return wrap


__all__ = ["OUTPUT_OPTIONS", "Outputs", "option", "output_options", "print_document", "wrote_line"]
