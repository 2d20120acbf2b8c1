"""The ``imprint`` command line: every command, by topic, over the pipeline's stages.

Commands live by topic (:mod:`.run`, :mod:`.diagnostics`, :mod:`.game`) and share one error
handler, one list parser, one KEY=VALUE parser and one progress factory (:mod:`.common`).
Nothing heavy is imported here: ``imprint attacks`` loads no torch.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

try:  # typer vendors click since 0.2x: its usage errors are that copy's classes
    from typer._click import exceptions as click_errors
except ImportError:  # pragma: no cover - an older typer over click itself
    from click import exceptions as click_errors  # type: ignore[no-redef]

from imprint.cli import audit as audit_commands
from imprint.cli import diagnostics, game, study
from imprint.cli import duci as duci_commands
from imprint.cli import run as run_commands
from imprint.cli import view as view_commands

__all__ = ["app", "main"]


class _OneLineErrors(TyperGroup):
    """The top command group: click's own usage errors (an unknown option, a missing or bad
    value, an unknown command) as one ``error:`` line naming the command's ``--help``, exit
    code 2, like every other imprint error (:func:`imprint.cli.common.fail`)."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        call = dict(args=args, prog_name=prog_name, complete_var=complete_var,
                    windows_expand_args=windows_expand_args, **extra)  # fmt: skip
        if not standalone_mode:
            return super().main(standalone_mode=False, **call)
        try:
            code = super().main(standalone_mode=False, **call)
        except click_errors.NoArgsIsHelpError:  # a bare group: its help is printed already
            sys.exit(2)
        except click_errors.ClickException as err:
            sys.exit(_one_line(err))
        except typer.Abort:
            typer.echo("error: aborted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


def _one_line(err: click_errors.ClickException) -> int:
    """Print ``err`` as ``error: <message> (see: imprint CMD --help)``; return its exit code."""
    message = " ".join(err.format_message().split())
    ctx = getattr(err, "ctx", None)
    hint = f" (see: {ctx.command_path} --help)" if ctx is not None else ""
    typer.echo(f"error: {message}{hint}", err=True)
    return 2 if isinstance(err, click_errors.UsageError) else err.exit_code


app = typer.Typer(
    cls=_OneLineErrors,
    add_completion=False,
    no_args_is_help=True,
    help="Membership inference attacks against LLMs, measured honestly.",
)


Quiet = Annotated[
    bool,
    typer.Option(
        "--quiet",
        "-q",
        help="print only results (tables, verdicts, their warnings, output paths) and errors: "
        "no progress, no plan or stage lines",
    ),
]
LogFormat = Annotated[
    str,
    typer.Option(
        "--log-format",
        help="text, or jsonl: progress and stage lines as JSON objects on stderr, one per line "
        "(stage_start, progress, stage_end, info, warning, result, error, interrupted); the "
        "results still print on stdout",
    ),
]


def _print_version(asked: bool) -> None:
    """``imprint --version``: the installed package's version, then exit (before any command)."""
    if asked:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("llm-imprint")
        except PackageNotFoundError:  # run from a source tree that is not installed
            from imprint import __version__ as found
        typer.echo(f"imprint {found}")
        raise typer.Exit(0)


Version = Annotated[
    bool,
    typer.Option(
        "--version", is_eager=True, callback=_print_version, help="print the version and exit"
    ),
]


@app.callback()
def _every_command(
    quiet: Quiet = False, log_format: LogFormat = "text", version: Version = False
) -> None:
    """Before any command: how it talks (--quiet, --log-format), the console's layout for
    where it prints (a terminal's width, or 80 columns for a pipe or a file unless COLUMNS
    says otherwise; tables wrap, nothing cut), and other libraries' progress bars off where
    imprint draws none."""
    from imprint.cli.common import fit_console
    from imprint.report.progress import silence_third_party_bars
    from imprint.report.terminal import LOG_FORMATS, configure

    if log_format not in LOG_FORMATS:
        raise typer.BadParameter(
            f"{log_format!r}: use text or jsonl (a JSON-lines event stream on stderr)",
            param_hint="--log-format",
        )
    configure(quiet=quiet, log_format=log_format)
    fit_console()
    silence_third_party_bars()


app.command("run")(run_commands.run)
app.command("attacks")(run_commands.list_attacks)
app.command("backends")(run_commands.list_backends)
app.command("datasets")(run_commands.list_datasets)

app.command("blind")(diagnostics.blind)
app.add_typer(diagnostics.overlap_app, name="overlap")
app.add_typer(diagnostics.data_app, name="data")
app.command("perturb")(diagnostics.perturb)
app.command("perturb-table")(diagnostics.perturb_table)
app.command("compare")(diagnostics.compare)

app.add_typer(game.game_app, name="game")
app.command("demo")(game.demo)
app.command("experiment")(study.experiment)

app.add_typer(audit_commands.canaries_app, name="canaries")
app.command("audit")(audit_commands.audit)
app.command("duci")(duci_commands.duci)
app.command("view")(view_commands.view)


def main() -> None:  # pragma: no cover - console entry
    app()
