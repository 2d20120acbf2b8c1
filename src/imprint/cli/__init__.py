"""The ``imprint`` command line: every command, by topic, over the pipeline's stages.

Commands live by topic (:mod:`.run`, :mod:`.diagnostics`, :mod:`.game`) and share one error
handler, one list parser, one KEY=VALUE parser and one progress factory (:mod:`.common`).
Nothing heavy is imported here: ``imprint attacks`` loads no torch.
"""

from __future__ import annotations

import typer

from imprint.cli import audit as audit_commands
from imprint.cli import diagnostics, game, study
from imprint.cli import run as run_commands

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Membership inference attacks against LLMs, measured honestly.",
)


@app.callback()
def _every_command() -> None:
    """Before any command: the console's layout for where it prints (a terminal, or a pipe:
    full width, nothing cut), and other libraries' progress bars off."""
    from imprint.cli.common import fit_console
    from imprint.report.progress import silence_third_party_bars

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


def main() -> None:  # pragma: no cover - console entry
    app()
