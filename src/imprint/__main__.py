"""``python -m imprint`` runs the CLI."""

from imprint.cli import app

app()
