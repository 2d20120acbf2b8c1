"""``imprint run`` and the listings (``attacks``, ``backends``, ``datasets``).

Listing attacks imports no torch: the attack registry is lazy and nothing here loads a model.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path
from typing import Annotated, Any

import typer

from imprint.cli.common import (
    console,
    handle_errors,
    parse_key_values,
    parse_list,
    run_attacks,
    say,
    split_key_value,
)
from imprint.cli.flags import API_FLAGS, SHARED_FLAGS
from imprint.cli.listing import Format, check_format
from imprint.cli.options import RunOptions
from imprint.errors import ConfigError, DataError, ImprintError

__all__ = [
    "list_attacks",
    "list_backends",
    "list_datasets",
    "parse_params",
    "parse_refs",
    "run",
    "run_config_kwargs",
    "split_model_args",
]


def parse_params(items: list[str]) -> dict[str, dict[str, Any]]:
    """``attack.param=value`` items into {attack: {param: value}}; values stay text here and are
    parsed to each parameter's declared type by :func:`imprint.attacks.params.check_params`."""
    out: dict[str, dict[str, Any]] = {}
    example = "min_k.k=0.1"
    for key, value in parse_key_values(items, option="--param", example=example).items():
        attack, dot, param = key.partition(".")
        if not dot or not attack.strip() or not param.strip():
            raise typer.BadParameter(
                f"{key}={value!r}: use ATTACK.PARAM=VALUE, e.g. {example}", param_hint="--param"
            )
        out.setdefault(attack.strip(), {})[param.strip()] = value
    return out


def split_model_args(items: list[str]) -> list[str]:
    """``["dtype=bfloat16,max_length=512", "device=cpu"]`` -> one ``KEY=VALUE`` each, as
    lm-evaluation-harness reads ``--model_args``: a comma starts a new pair only where the text
    after it up to the next comma holds an ``=`` (so ``stop=a,b`` keeps its comma). An empty
    part between pairs or at the end (``a=1,,b=2``, ``a=1,``) is dropped, as lm-eval drops it;
    one inside a value (``stop=a,,b``) is refused: dropping it would change the value."""
    out: list[str] = []
    for item in items:
        pairs: list[str] = []
        empty = False  # an empty part since the last pair
        for part in item.split(","):
            if not part.strip():
                empty = True
                continue
            if pairs and "=" not in part:
                if empty:
                    raise _empty_inside(item, pairs[-1])
                pairs[-1] += "," + part  # a comma inside the value before it
            else:
                pairs.append(part)
            empty = False
        out += [p for p in pairs if p.strip()]
    return out


def _empty_inside(item: str, pair: str) -> ConfigError:
    key = pair.split("=", 1)[0].strip()
    return ConfigError(
        f"--model-args {item!r}: an empty part inside the value of {key!r} (two commas in a "
        "row); a value cannot hold an empty item here: write it without one, e.g. stop=a,b"
    )


def parse_refs(items: list[str]) -> tuple[tuple[str, str], ...]:
    """``NAME=SPEC`` or ``SPEC`` (named ref1, ref2, ...) into (name, spec) pairs (the run
    refuses a name given twice)."""
    return tuple(
        split_key_value(item, option="--ref", example="base=smollm2-135m")
        if "=" in item
        else (f"ref{i}", item)
        for i, item in enumerate(items, 1)
    )


def run_config_kwargs(options: RunOptions) -> dict[str, Any]:
    """The keywords of :func:`imprint.cli.flags.config_from_flags` (``RunConfig`` fields and the
    shorthand model flags) from typed run options: each flag read here by name, parsed where
    it is text (lists, KEY=VALUE items), renamed where ``RunConfig`` names it otherwise.
    ``--param`` values stay text: :func:`imprint.run.plan.resolve` types them, once."""
    from imprint.documents.run_hook import document_options
    from imprint.executors import ExecutorConfig

    o = options
    return {
        "model": o.model,
        "data": o.data,
        "out": o.out,
        "attacks": parse_list(o.attacks, option="--attacks", example="loss,zlib"),
        "refs": parse_refs(list(o.ref)),
        "references": o.references,
        "allow_unmatched_ids": o.allow_unmatched_ids,
        "model_args": parse_key_values(
            split_model_args(list(o.model_arg)),
            option="--model-args",
            example="dtype=bfloat16,max_length=512",
        ),
        "params": parse_params(list(o.param)),
        "pools": parse_key_values(list(o.pool), option="--pool", example="nonmembers=wikimia:32"),
        "shot_holdout": o.shot_holdout,
        "text_field": o.text_field,
        "label_field": o.label_field,
        "truncate_words": o.truncate,
        "documents": document_options(
            o.unit,
            doc_field=o.doc_field,
            seq_words=o.seq_words,
            max_seqs=o.max_seqs,
            di_power=o.di_power,
            di_effect_auc=o.di_effect_auc,
            meeus_features=o.meeus_features,
        ),
        "min_words": o.min_words,
        "n_per_label": o.n_per_label,
        "breakdown": o.breakdown,
        "seed": o.seed,
        "n_bootstrap": o.bootstrap,
        **{name: getattr(o, name) for name in SHARED_FLAGS},  # device, dtype, ...
        "token_budget": o.token_budget,
        "cache": o.cache,
        "blind": not o.no_blind,
        "on_bad": o.on_bad,
        "overwrite": o.overwrite,
        "api_base": o.api_base,
        **{name: getattr(o, name) for name in API_FLAGS if name != "api_key_env"},
        "api_key_env": o.api_key_env or None,  # "" = no key
        # Ray missing for --executor ray fails here, before any work, with the install command
        "executor": ExecutorConfig(
            kind=o.executor_kind, address=o.address, workers=o.workers, worker_cpus=o.worker_cpus
        ),
    }


@handle_errors
def run(ctx: typer.Context, **flags: Any) -> None:
    """Run membership inference attacks and write a report folder."""
    options = RunOptions(**_tuples(flags))
    try:
        result, reserved = _run(ctx, options)
    except ImprintError as err:  # errors from below name Python arguments: say the flags
        raise _as_flags(err, ctx) from err
    if reserved:
        from imprint.outdir import link_latest

        link = link_latest(result.out)
        latest = Path(result.out).parent / "latest"
        to = (
            f"; {link} points to it"
            if link
            else f"; {latest} is a real folder (an earlier release wrote runs there), left as "
            "it is, so it does not point to this run (move it away to get the link)"
        )
        say(f"run folder: {result.out}{to}")


def option_annotation(name: str) -> Any:
    """The run option ``name`` of :class:`RunOptions` as a typer annotation (type, help, flag
    spellings), for ``run`` and for other commands that take the same flag."""
    field = _FIELDS[name]
    kind = typing.get_type_hints(RunOptions)[name]
    if typing.get_origin(kind) is tuple:  # a repeatable flag: typer takes a list
        kind = list[str]
    info = typer.Option(
        *field.metadata["flags"], help=field.metadata["help"], show_default=name not in _REQUIRED
    )
    return Annotated[kind, info]


def _signature() -> inspect.Signature:
    """``run``'s parameters as typer reads them, derived from :class:`RunOptions` (the options
    every model takes listed last)."""
    shared = set(SHARED_FLAGS)
    params = [inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                annotation=typer.Context)]  # fmt: skip
    for name in sorted(_FIELDS, key=lambda n: n in shared):
        default = _FIELDS[name].default
        params.append(
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=[] if isinstance(default, tuple) else default,
                annotation=option_annotation(name),
            )
        )
    return inspect.Signature(params, return_annotation=None)


_FIELDS = {f.name: f for f in dataclasses.fields(RunOptions)}
_REQUIRED = ("model", "data")  # None in the declaration: --config may give them instead
run.__signature__ = _signature()  # type: ignore[attr-defined]
#: the Ray flags, for the commands that run on Ray too (``imprint experiment``)
ExecutorKind = option_annotation("executor_kind")
Address = option_annotation("address")
Workers = option_annotation("workers")
WorkerCpus = option_annotation("worker_cpus")


def _run(ctx: typer.Context, options: RunOptions) -> tuple[Any, bool]:
    """The run of the command line's ``options`` after ``--config``, ``--limit`` and lm-eval's
    model spelling are read, and whether its folder is a new default one (reserved here, and
    released if the run fails)."""
    from imprint.cli.flags import lm_eval_model, n_per_label_from_limit
    from imprint.cli.run_file import read_run_file
    from imprint.outdir import default_run_dir, release_run_dir

    if options.config is not None:
        read = read_run_file(options.config, ctx, typing.get_type_hints(RunOptions))
        options = dataclasses.replace(options, **_tuples(read))
    for name in _REQUIRED:
        if getattr(options, name) is None:
            ctx.fail(f"Missing option '--{name}' (give it on the command line or in --config)")
    data = options.data
    assert options.model is not None and data is not None
    n_per_label = n_per_label_from_limit(options.limit, options.n_per_label)
    pairs = split_model_args(list(options.model_arg))
    model, model_args, note = lm_eval_model(options.model, pairs)
    if note:
        say(note)
    options = dataclasses.replace(
        options, model=model, model_arg=tuple(model_args), n_per_label=n_per_label, limit=None
    )
    reserved = options.out is None
    if reserved:  # a new folder per run, reserved now: no run replaces another unasked
        options = dataclasses.replace(options, out=default_run_dir(model, data))
    try:
        return run_attacks(console=console, **run_config_kwargs(options)), reserved
    except BaseException:
        if reserved and options.out is not None:
            release_run_dir(options.out)  # an empty reservation, left by a failed run
        raise


def _tuples(values: dict[str, Any]) -> dict[str, Any]:
    """Option values with the repeatable flags' lists as tuples (RunOptions is frozen)."""
    return {k: tuple(v) if isinstance(v, list) else v for k, v in values.items()}


def _as_flags(err: ImprintError, ctx: typer.Context) -> ImprintError:
    """``err`` with the Python names of run options (``n_per_label``) written as the flags
    (``--n-per-label``); an error whose message is built otherwise is kept as it is, and so is
    a :class:`~imprint.backends.options.BackendOptionError` (its subclass of ConfigError): it
    names backend options as ``--model-arg`` takes them (``max_length``), not run options."""
    from imprint.cli.flags import flag_spelling

    flags = {p.name: p.opts[0] for p in ctx.command.params if p.name and p.opts}
    flags.update(RENAMED_FLAGS)
    message = flag_spelling(str(err), flags)
    if message == str(err) or type(err) not in (ConfigError, DataError):
        return err
    return type(err)(message)


#: RunConfig fields (the Python API's names) whose flag has another name
RENAMED_FLAGS = {
    "truncate_words": "--truncate",
    "n_bootstrap": "--bootstrap",
    "model_args": "--model-args",
    "executor_kind": "--executor",
}


def list_attacks(fmt: Format = "table") -> None:
    """List the registered attacks, one line each (plugins with their package, broken ones too)."""
    from imprint.cli.tables import print_attacks  # the listing lives there

    print_attacks(check_format(fmt))


def list_backends(fmt: Format = "table") -> None:
    """List the model schemes: provider, capabilities, options (--model-args KEY=VALUE), aliases."""
    from imprint.cli.tables import print_backends  # the listing lives there

    print_backends(check_format(fmt))


def list_datasets(
    name: Annotated[str | None, typer.Argument(help="names starting with this")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="every field as JSON")] = False,
    fmt: Format = "table",
) -> None:
    """List the named benchmarks: provenance, licence, size, fields, caveats, local copy."""
    from imprint.cli.datasets import list_datasets as show  # the table lives there

    show(name, as_json, check_format(fmt))
