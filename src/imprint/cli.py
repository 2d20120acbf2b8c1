"""The ``imprint`` command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from imprint.errors import ImprintError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Membership inference attacks against LLMs, measured honestly.",
)
console = Console()


def parse_params(items: list[str]) -> dict[str, dict[str, Any]]:
    """``attack.param=value`` items into {attack: {param: value}}; values stay text here and are
    parsed to each parameter's declared type by :func:`imprint.attacks.params.check_params`."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        attack, dot, param = key.partition(".")
        if not sep or not dot or not attack or not param:
            raise typer.BadParameter(f"{item!r}: use ATTACK.PARAM=VALUE, e.g. min_k.k=0.1")
        out.setdefault(attack, {})[param] = value
    return out


def parse_model_args(items: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` items into {key: value}; values stay text here and are parsed to the option
    types of the target's provider by :func:`imprint.backends.registry.choose_backend`."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise typer.BadParameter(f"{item!r}: use KEY=VALUE, e.g. --model-arg dtype=bfloat16")
        if key in out:
            raise typer.BadParameter(f"--model-arg {key} is given twice; keep one")
        out[key] = value
    return out


def parse_refs(items: list[str]) -> tuple[tuple[str, str], ...]:
    """``NAME=SPEC`` or ``SPEC`` (named ref1, ref2, ...) into (name, spec) pairs."""
    refs = []
    for i, item in enumerate(items, 1):
        name, sep, spec = item.partition("=")
        refs.append((name, spec) if sep else (f"ref{i}", item))
    return tuple(refs)


def _fail(err: Exception) -> None:
    # escaped: brackets in a message (pip install 'llm-imprint[vllm]') are text, not markup
    console.print(f"[bold red]error:[/] {escape(str(err))}")
    raise typer.Exit(2)


@app.command()
def run(
    model: Annotated[
        str,
        typer.Option(
            help="target: alias, folder, hf:ID or owner/name, gguf:PATH, vllm:SPEC, game:DIR, "
            "openai:MODEL (with --api-base; there any name is the API's model name)"
        ),
    ],
    data: Annotated[str, typer.Option(help="data: file, wikimia:32, hf:ID, game:DIR")],
    attacks: Annotated[str, typer.Option(help="comma-separated attacks, or 'all'")] = "all",
    ref: Annotated[list[str], typer.Option(help="reference model NAME=SPEC (repeatable)")] = [],  # noqa: B006
    model_arg: Annotated[
        list[str],
        typer.Option(
            help="KEY=VALUE option of the target's backend (repeatable), e.g. dtype=bfloat16, "
            "vllm: tensor_parallel_size=2; a wrong key lists the ones it takes"
        ),
    ] = [],  # noqa: B006
    out: Annotated[Path, typer.Option(help="run folder to write")] = Path("runs/latest"),
    param: Annotated[list[str], typer.Option(help="ATTACK.PARAM=VALUE (repeatable)")] = [],  # noqa: B006
    pool: Annotated[list[str], typer.Option(help="NAME=DATA pool for shots (repeatable)")] = [],  # noqa: B006
    text_field: Annotated[str | None, typer.Option()] = None,
    label_field: Annotated[str | None, typer.Option()] = None,
    truncate: Annotated[int | None, typer.Option(help="truncate texts to N words")] = None,
    min_words: Annotated[int | None, typer.Option(help="drop texts under N words")] = None,
    n_per_label: Annotated[int | None, typer.Option(help="sample N members, N non-members")] = None,
    breakdown: Annotated[str | None, typer.Option(help="meta field to break AUC down by")] = None,
    seed: Annotated[int, typer.Option()] = 0,
    bootstrap: Annotated[int, typer.Option(help="bootstrap resamples")] = 1000,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or auto")] = "auto",
    dtype: Annotated[str, typer.Option(help="auto, float32, bfloat16, float16")] = "auto",
    max_length: Annotated[int | None, typer.Option(help="context window for scoring")] = None,
    token_budget: Annotated[int, typer.Option(help="padded tokens per batch")] = 4096,
    cache: Annotated[Path | None, typer.Option(help="signal cache (SQLite) path")] = None,
    no_blind: Annotated[bool, typer.Option("--no-blind", help="skip the blind baseline")] = False,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite", help="replace an --out folder that is not an imprint run (deletes it)"
        ),
    ] = False,
    api_base: Annotated[
        str | None,
        typer.Option(help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1 (black-box)"),
    ] = None,
    api_mode: Annotated[str, typer.Option(help="completions or chat")] = "completions",
    api_key_env: Annotated[
        str, typer.Option(help="environment variable holding the API key (never stored)")
    ] = "OPENAI_API_KEY",
    api_concurrency: Annotated[int, typer.Option(help="requests in flight at once")] = 8,
    api_top_k: Annotated[
        int | None, typer.Option(help="send top_k (servers that accept it: vLLM, llama.cpp)")
    ] = None,
    api_timeout: Annotated[float, typer.Option(help="seconds per API request attempt")] = 60.0,
    api_max_retries: Annotated[
        int, typer.Option(help="retries per API request (429, 5xx, timeouts) before the run stops")
    ] = 6,
) -> None:
    """Run membership inference attacks and write a report folder."""
    from imprint.attacks.params import check_params

    try:
        params = check_params(parse_params(param))  # typed before torch or any model loads
        from imprint.run import RunConfig, execute_run

        pools = dict(p.split("=", 1) for p in pool)
        config = RunConfig(
            model=model,
            data=data,
            out=out,
            attacks=tuple(a.strip() for a in attacks.split(",") if a.strip()),
            refs=parse_refs(ref),
            model_args=parse_model_args(model_arg),
            params=params,
            pools=pools,
            text_field=text_field,
            label_field=label_field,
            truncate_words=truncate,
            min_words=min_words,
            n_per_label=n_per_label,
            breakdown=breakdown,
            seed=seed,
            n_bootstrap=bootstrap,
            device=device,
            dtype=dtype,
            max_length=max_length,
            token_budget=token_budget,
            cache=cache,
            blind=not no_blind,
            api_base=api_base,
            api_mode=api_mode,
            api_key_env=api_key_env or None,
            api_concurrency=api_concurrency,
            api_top_k=api_top_k,
            api_timeout=api_timeout,
            api_max_retries=api_max_retries,
            overwrite=overwrite,
        )
        execute_run(config, console=console)
    except (ImprintError, ValueError) as err:
        _fail(err)


@app.command("attacks")
def list_attacks() -> None:
    """List the registered attacks, one line each."""
    from imprint.attacks import available_attacks

    for name, cls in available_attacks().items():
        typer.echo(f"{name:<14} {cls.access:<9} {cls.summary}  [{cls.paper}]")


@app.command("backends")
def list_backends() -> None:
    """List the model schemes: provider, capabilities, options (--model-arg KEY=VALUE)."""
    import dataclasses

    from imprint.backends import available_backends

    for name, provider in available_backends().items():
        caps = ",".join(sorted(provider.capabilities))
        options = ", ".join(f.name for f in dataclasses.fields(provider.options))
        typer.echo(f"{name + ':':<8} {caps:<27} {provider.summary}\n{'':<9}options: {options}")
    from imprint.backends.models import model_schemes

    for scheme in model_schemes():  # e.g. game:DIR, resolved to a folder that hf loads
        typer.echo(f"{scheme + ':':<8} served by hf (resolves to a model folder)")


@app.command("datasets")
def list_datasets() -> None:
    """List the named benchmarks and where each is found, one line each."""
    from imprint.data import list_benchmarks

    for info in list_benchmarks():
        where = str(info.local_path) if info.local_path else "hub only (offline: unavailable)"
        typer.echo(f"{info.name:<14} {info.description}  [{where}]")


def _mount_subcommands() -> None:
    """Commands that live with their pipeline stage (diagnostics, games)."""
    from imprint.diagnostics import cli as diag

    app.command("blind")(diag.blind)
    app.add_typer(diag.overlap_app, name="overlap")
    data_app = typer.Typer(no_args_is_help=True, help="Data transforms.")
    data_app.command("filter")(diag.data_filter)
    app.add_typer(data_app, name="data")
    app.command("perturb")(diag.perturb)
    app.command("perturb-table")(diag.perturb_table)
    app.command("compare")(diag.compare)

    from imprint.game import cli as game

    app.add_typer(game.game_app, name="game")
    app.command("demo")(game.demo)


_mount_subcommands()


def main() -> None:  # pragma: no cover - console entry
    app()
