"""Help and usage errors in the manner of `git` and `docker`: plain text, upper-case
placeholders (`QUERY`, `PATH...`, `--top-k N`), an option's choices listed as they are typed,
paragraphs wrapped at word boundaries, and a usage error as one line on stderr.

`styled(app)` gives every command and group of a Typer app these classes before the app is
turned into click commands; typer's own help (rich panels) stays unused.
"""

from __future__ import annotations

import re
import sys
import textwrap
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from typer._click.exceptions import NoArgsIsHelpError
from typer._click.formatting import HelpFormatter
from typer.core import TyperCommand, TyperGroup

from core.errors import lower_first, problem


class PlainFormatter(HelpFormatter):
    """click's formatter, wrapping only between words (never inside one, nor at a hyphen)."""

    def write_text(self, text: str) -> None:
        indent = " " * self.current_indent
        paragraphs = [p for p in text.split("\n\n") if p.strip()]
        self.write("\n\n".join(fill(p, self.width, indent) for p in paragraphs) + "\n")

    def write_dl(
        self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
    ) -> None:
        rows = list(rows)
        first_col = min(max(len(first) for first, _ in rows), col_max) + col_spacing
        margin = " " * (first_col + self.current_indent)
        for first, second in rows:
            self.write(" " * self.current_indent + first)
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + margin)
            lines = fill(second, max(self.width - first_col - 2, 10)).splitlines()
            self.write("\n".join([lines[0], *(margin + line for line in lines[1:])]) + "\n")


def fill(text: str, width: int, indent: str = "") -> str:
    """One paragraph re-wrapped to `width` at spaces only."""
    return textwrap.fill(
        " ".join(text.split()),
        width,
        initial_indent=indent,
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=False,
    )


class HelpContext(typer.Context):
    formatter_class = PlainFormatter


# The types whose values a user types as written: the placeholder is the value's kind.
PLACEHOLDERS: dict[Any, str] = {int: "N", float: "NUMBER", Path: "PATH"}


def placeholder(param: Any) -> str:
    """An argument's or option's value as help shows it: its metavar, else a name by kind."""
    if param.metavar:
        return str(param.metavar)
    kind = param.type_descriptor.annotation
    name = PLACEHOLDERS.get(kind) if param.param_type_name == "option" else None
    name = name or str(param.name).upper()
    if param.param_type_name == "argument" and param.nargs != 1:
        name = name.removesuffix("S") + "..."  # PATHS -> PATH...
    return name


def choices(param: Any) -> list[str]:
    """The values a choice option takes, as they are typed (an enum's values, not its names)."""
    descriptor = param.type_descriptor
    if descriptor.parameter_info.parser is not None:  # its own parser says what it takes
        return []
    found = descriptor.choices or []
    return [str(c.value if isinstance(c, Enum) else c) for c in found]


def option_row(param: Any) -> tuple[str, str]:
    """The help row of an option: `-k, --top-k N` and its help, default and choices."""
    names = ", ".join(sorted(param.opts, key=len))
    if param.secondary_opts:
        names += " / " + ", ".join(param.secondary_opts)
    if not param.is_flag:
        names += " " + placeholder(param)
    notes = [sentence(param.help or "")]
    if values := choices(param):
        case = "" if param.type_descriptor.case_sensitive else " (any case)"
        notes.append(f"One of{case}: {', '.join(values)}.")
    if param.required:
        notes.append("Required.")
    elif not param.is_flag and param.default not in (None, [], ()) and param.show_default:
        default = param.default.value if isinstance(param.default, Enum) else param.default
        notes.append(f"Default: {default}.")
    return names, " ".join(note for note in notes if note)


def sentence(text: str) -> str:
    """A help text ending as a sentence does (so notes can follow it)."""
    text = text.strip()
    return text + "." if text and text[-1] not in ".!?" else text


def format_params(command: Any, ctx: Any, formatter: Any) -> None:
    """The Arguments and Options sections."""
    arguments, options = [], []
    for param in command.get_params(ctx):
        if getattr(param, "hidden", False):
            continue
        if param.param_type_name == "argument":
            arguments.append((placeholder(param), param.help or ""))
        else:
            options.append(option_row(param))
    for title, rows in (("Arguments", arguments), ("Options", options)):
        if rows:
            with formatter.section(title):
                formatter.write_dl(rows)


def usage_pieces(command: Any, ctx: Any) -> list[str]:
    """`[OPTIONS] QUERY` or `[OPTIONS] PATH...` (optional arguments in brackets)."""
    pieces = [command.options_metavar] if command.options_metavar else []
    for param in command.get_params(ctx):
        if param.param_type_name == "argument":
            name = placeholder(param)
            pieces.append(name if param.required else f"[{name}]")
    return pieces


def first_sentence(text: str) -> str:
    """The first sentence of a help text, on one line."""
    paragraph = " ".join(text.strip().split("\n\n", 1)[0].split())
    head, dot, _ = paragraph.partition(". ")
    return head + "." if dot else paragraph


def usage_message(error: typer.TyperException) -> str:
    """A usage error of typer's click as `WHAT is wrong; how to see the usage`."""
    ctx = getattr(error, "ctx", None)
    path = " ".join(["cogmill", *ctx.command_path.split()[1:]]) if ctx else "cogmill"
    see = f"`{path} --help` shows the usage"
    param = getattr(error, "param", None)
    option = getattr(error, "option_name", None)
    if param is not None:
        name = _name(param)
        if type(error).__name__ == "MissingParameter":
            return f"{name} is missing; {see}"
        return f"{_bad_value(name, error)}; {see}"
    if option is not None and hasattr(error, "possibilities"):  # no such option
        options = " or ".join(error.possibilities or [])
        maybe = f" (did you mean {options}?)" if options else ""
        return f"{path} has no option {option}{maybe}; {see}"
    if option is not None and "requires an argument" in error.message:
        return f"{option} needs a value; {see}"
    return f"{lower_first(error.message.rstrip('.'))}; {see}"


def _name(param: Any) -> str:
    """An option by its long name (--top-k), an argument by its metavar (JOB_ID)."""
    longs = [opt for opt in getattr(param, "opts", []) if opt.startswith("--")]
    return longs[0] if longs else str(param.metavar or param.name or "argument").upper()


_CHOICES = re.compile(r"^(?P<value>.+?) is not one of (?P<choices>.+?)\.?$")


def _bad_value(name: str, error: typer.TyperException) -> str:
    """`NAME must be ..., got VALUE`: typer checks values with pydantic, whose error is the
    cause; a callback's own message is used as it is."""
    cause = error.__cause__
    if isinstance(cause, ValidationError) and cause.errors():
        first = cause.errors()[0]
        text = str(first.get("msg", "")).removeprefix("Value error, ")
        choices = _CHOICES.match(text)
        if choices:
            listed = choices["choices"].replace("'", "")
            return f"{name} must be one of {listed}; got {choices['value']}"
        return problem(name, first)
    message = lower_first(error.message.rstrip("."))
    return f"{name} {message}" if message.startswith("must be ") else f"{name}: {message}"


def run_main(main: Any, standalone_mode: bool, **kwargs: Any) -> Any:
    """Run click's `main` without its standalone handling, then exit as it would have, a usage
    error printed as one line (exit 2)."""
    try:
        result = main(standalone_mode=False, **kwargs)
    except NoArgsIsHelpError as error:  # `cogmill` alone: the help, as git does
        if not standalone_mode:
            raise
        typer.echo(error.format_message())
        sys.exit(0)
    except typer.TyperException as error:  # typer's click: usage and file errors
        if not standalone_mode:
            raise
        print(f"error: {usage_message(error)}", file=sys.stderr)
        sys.exit(error.exit_code)
    except typer.Abort:
        if not standalone_mode:
            raise
        print("error: aborted", file=sys.stderr)
        sys.exit(1)
    if not standalone_mode:
        return result
    sys.exit(result if isinstance(result, int) else 0)


def name_values(params: Sequence[Any]) -> None:
    """Give each parameter its placeholder as metavar, so usage errors name it so too."""
    for param in params:
        if param.param_type_name == "argument" or not param.is_flag:
            param.metavar = placeholder(param)


class Command(TyperCommand):
    """A command with plain help and one-line usage errors."""

    context_class = HelpContext

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        name_values(self.params)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return usage_pieces(self, ctx)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.format_usage(ctx, formatter)
        self.format_help_text(ctx, formatter)
        format_params(self, ctx, formatter)
        self.format_epilog(ctx, formatter)

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        return run_main(super().main, standalone_mode, **_named(args, kwargs))


class Group(TyperGroup):
    """A command group with plain help and one-line usage errors."""

    context_class = HelpContext

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.format_usage(ctx, formatter)
        self.format_help_text(ctx, formatter)
        format_params(self, ctx, formatter)
        self.format_commands(ctx, formatter)
        self.format_epilog(ctx, formatter)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """Each command with the first sentence of its help, whole (wrapped, not cut)."""
        rows = []
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, first_sentence(command.short_help or command.help or "")))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        return run_main(super().main, standalone_mode, **_named(args, kwargs))


def _named(args: Sequence[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    return {**dict(zip(("args", "prog_name", "complete_var"), args, strict=False)), **kwargs}


def styled(app: typer.Typer) -> typer.Typer:
    """`app` with the classes above on every command and group it holds, however deep."""
    app.info.cls = Group
    for command in app.registered_commands:
        command.cls = Command
    for group in app.registered_groups:
        group.cls = Group
        if group.typer_instance is not None:
            styled(group.typer_instance)
    return app
