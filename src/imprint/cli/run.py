"""``imprint run`` and the listings (``attacks``, ``backends``, ``datasets``).

Listing attacks imports no torch: the attack registry is lazy and nothing here loads a model.
"""

from __future__ import annotations

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
from imprint.cli.listing import Format, check_format
from imprint.errors import ConfigError, DataError, ImprintError

__all__ = [
    "list_attacks",
    "list_backends",
    "list_datasets",
    "parse_params",
    "parse_refs",
    "run",
    "split_model_args",
]

Model = Annotated[
    str | None,
    typer.Option(
        help="target (required): alias, folder, hf:ID or a hub id (owner/name, or a name such "
        "as gpt2), gguf:PATH, vllm:SPEC, game:DIR, openai:MODEL (with --api-base; there any "
        "name is the API's model name); lm-eval's --model hf --model-args pretrained=ID reads "
        "as hf:ID",
        show_default=False,
    ),
]
Data = Annotated[
    str | None,
    typer.Option(help="data (required): file, wikimia:32, hf:ID, game:DIR", show_default=False),
]
Limit = Annotated[
    int | None,
    typer.Option(
        help="lm-eval's name for a quick run: N texts in all, N/2 members and N/2 non-members "
        "(the same as --n-per-label N/2; N even)"
    ),
]
ConfigFile = Annotated[
    Path | None,
    typer.Option(
        "--config",
        help="a YAML file of run flags, one per line without the dashes (n-per-label: 20; "
        "lists for repeatable flags); flags on the command line win; an unknown key is refused",
    ),
]
Attacks = Annotated[str, typer.Option(help="comma-separated attacks, or 'all'")]
Refs = Annotated[list[str], typer.Option(help="reference model NAME=SPEC (repeatable)")]
ModelArgs = Annotated[
    list[str],
    typer.Option(
        "--model-args",
        "--model-arg",
        "--model_args",
        help="options of the target's backend as lm-eval takes them, KEY=VALUE[,KEY=VALUE...] "
        "(repeatable), e.g. --model-args dtype=bfloat16,max_length=512; vllm: "
        "tensor_parallel_size=2; a wrong key lists the ones it takes; a comma followed by text "
        "without '=' stays in the value (stop=a,b), and an empty item inside a value is refused",
    ),
]
Out = Annotated[
    Path | None,
    typer.Option(
        help="run folder to write (a new one; an earlier run is rewritten if it has the same "
        "configuration, else replaced only with --overwrite); "
        "default: a new runs/<YYYYmmdd-HHMMSS>-<model>-<data>, with runs/latest linked to it"
    ),
]
Params = Annotated[list[str], typer.Option(help="ATTACK.PARAM=VALUE (repeatable)")]
Pools = Annotated[list[str], typer.Option(help="NAME=DATA pool for shots (repeatable)")]
ShotHoldout = Annotated[
    int,
    typer.Option(
        help="non-member shots held out of EVERY attack's evaluation (whichever attacks run) "
        "for recall, con_recall, simmia: from --pool nonmembers, else natural evaluation "
        "non-members when there are at least twice as many; 0: none"
    ),
]
References = Annotated[
    str | None,
    typer.Option(
        help="reference models with known training data for lira/rmia: a game folder built "
        "with --reference-models K, or a training manifest (.json/.yaml)"
    ),
]
AllowUnmatched = Annotated[
    bool,
    typer.Option(
        "--allow-unmatched-ids",
        help="accept --references ids that match no sample of the run (counted in the manifest "
        "and report); by default they are refused",
    ),
]
Field = Annotated[str | None, typer.Option()]
ExecutorKind = Annotated[
    str, typer.Option("--executor", help="where model work runs: local (this process) or ray")
]
Address = Annotated[
    str | None,
    typer.Option(
        help="Ray cluster: auto (joins `ray start --head` here) or ray://HOST:10001; "
        "default: a private Ray on this machine"
    ),
]
Workers = Annotated[
    int | None,
    typer.Option(help="Ray model replicas; default one per GPU, else one per --worker-cpus cores"),
]
WorkerCpus = Annotated[int, typer.Option(help="cores per Ray CPU replica (its torch threads)")]
Truncate = Annotated[
    int | None,
    typer.Option("--truncate", "--truncate-words", help="truncate texts to N words"),
]
Unit = Annotated[
    str,
    typer.Option(
        help="sequence, or document: each row (or --doc-field group) is a document, split into "
        "--max-seqs sequences of --seq-words words, scored, then aggregated per document"
    ),
]
DocField = Annotated[
    str | None, typer.Option(help="with --unit document: rows sharing this field are one document")
]
# the document flags default to None ("not given", shown in --help as the default they take)
# so that --unit sequence refuses each one typed, even at its default value
SeqWords = Annotated[
    int | None, typer.Option(help="with --unit document: words per sequence (default 200)")
]
MaxSeqs = Annotated[
    int | None, typer.Option(help="with --unit document: sequences per document (default 25)")
]
DiPower = Annotated[
    float | None,
    typer.Option(
        help="with --unit document: the power dataset inference's verdict asks for (default "
        "0.8); under it the verdict is 'inconclusive' with the documents needed"
    ),
]
DiEffectAuc = Annotated[
    float | None,
    typer.Option(
        help="with --unit document: the smallest effect worth detecting, as a document AUC "
        "(default 0.6); 'not detected' needs enough documents to find it with --di-power"
    ),
]
MeeusFeatures = Annotated[
    str | None,
    typer.Option(
        help="with --unit document: Meeus et al. features: agg (the authors', default), hist, both"
    ),
]
MinWords = Annotated[int | None, typer.Option(help="drop texts under N words")]
NPerLabel = Annotated[int | None, typer.Option(help="sample N members, N non-members")]
Breakdown = Annotated[str | None, typer.Option(help="meta field to break AUC down by")]
Int = Annotated[int, typer.Option()]
Bootstrap = Annotated[int, typer.Option("--bootstrap", "--n-bootstrap", help="bootstrap resamples")]
Device = Annotated[str, typer.Option(help="cpu, cuda, cuda:N or auto")]
Dtype = Annotated[str, typer.Option(help="auto, float32, bfloat16, float16")]
MaxLength = Annotated[int | None, typer.Option(help="context window for scoring")]
TokenBudget = Annotated[
    int | None,
    typer.Option(
        help="padded tokens per forward; default auto: 4096 on CPU, sized from free "
        "GPU memory on CUDA"
    ),
]
StartToken = Annotated[
    str,
    typer.Option(
        help="token each text is scored after: auto (the model's document separator, e.g. "
        "<|endoftext|> where BOS is a chat marker), bos, none, or a literal token"
    ),
]
Cache = Annotated[Path | None, typer.Option(help="signal cache (SQLite) path")]
NoBlind = Annotated[bool, typer.Option("--no-blind", help="skip the blind baseline")]
OnBad = Annotated[
    str,
    typer.Option(
        help="a bad data row: raise (stop, naming file and line) or drop (drop it and count it "
        "in the manifest and report)"
    ),
]
Overwrite = Annotated[
    bool,
    typer.Option(
        "--overwrite",
        help="replace the --out folder: an earlier run, or a folder imprint did not write "
        "(deletes it)",
    ),
]
ApiBase = Annotated[
    str | None,
    typer.Option(help="OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1 (black-box)"),
]
ApiMode = Annotated[str, typer.Option(help="completions or chat")]
ApiKeyEnv = Annotated[
    str, typer.Option(help="environment variable holding the API key (never stored)")
]
ApiConcurrency = Annotated[int, typer.Option(help="requests in flight at once")]
ApiTopK = Annotated[
    int | None, typer.Option(help="send top_k (servers that accept it: vLLM, llama.cpp)")
]
ApiTimeout = Annotated[float, typer.Option(help="seconds per API request attempt")]
ApiMaxRetries = Annotated[
    int, typer.Option(help="retries per API request (429, 5xx, timeouts) before the run stops")
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


def _run_config(options: dict[str, Any]) -> dict[str, Any]:
    """``RunConfig`` fields from the ``run`` options: the renamed or parsed ones here, the rest
    pass through under their own name (an option RunConfig lacks fails loudly)."""
    from imprint.attacks.params import check_params

    renamed = {
        # typed first: a wrong --param fails before torch or any model loads
        "params": check_params(parse_params(options.pop("param"))),
        "attacks": parse_list(options.pop("attacks"), option="--attacks", example="loss,zlib"),
        "refs": parse_refs(options.pop("ref")),
        "model_args": parse_key_values(
            split_model_args(options.pop("model_arg")),
            option="--model-args",
            example="dtype=bfloat16,max_length=512",
        ),
        "pools": parse_key_values(
            options.pop("pool"), option="--pool", example="nonmembers=wikimia:32"
        ),
        "truncate_words": options.pop("truncate"),
        "n_bootstrap": options.pop("bootstrap"),
        "documents": _document_options(options),
        "blind": not options.pop("no_blind"),
        "api_key_env": options.pop("api_key_env") or None,  # "" = no key
        "executor": _executor_config(options),
    }
    return {**options, **renamed}


def _executor_config(options: dict[str, Any]) -> Any:
    """``--executor --address --workers --worker-cpus`` as an ExecutorConfig (Ray missing for
    ``--executor ray`` fails here, before any work, with the install command)."""
    from imprint.executors import ExecutorConfig

    return ExecutorConfig(
        kind=options.pop("executor_kind"),
        address=options.pop("address"),
        workers=options.pop("workers"),
        worker_cpus=options.pop("worker_cpus"),
    )


def _document_options(options: dict[str, Any]) -> Any:
    """``--unit --doc-field --seq-words --max-seqs --di-power --di-effect-auc --meeus-features``
    as DocumentOptions (None: sequences)."""
    from imprint.documents.run_hook import document_options

    return document_options(
        options.pop("unit"),
        doc_field=options.pop("doc_field"),
        seq_words=options.pop("seq_words"),
        max_seqs=options.pop("max_seqs"),
        di_power=options.pop("di_power"),
        di_effect_auc=options.pop("di_effect_auc"),
        meeus_features=options.pop("meeus_features"),
    )


@handle_errors
def run(
    ctx: typer.Context,
    model: Model = None,
    data: Data = None,
    config: ConfigFile = None,
    attacks: Attacks = "all",
    ref: Refs = [],  # noqa: B006
    references: References = None,
    allow_unmatched_ids: AllowUnmatched = False,
    model_arg: ModelArgs = [],  # noqa: B006
    out: Out = None,
    param: Params = [],  # noqa: B006
    pool: Pools = [],  # noqa: B006
    shot_holdout: ShotHoldout = 10,
    text_field: Field = None,
    label_field: Field = None,
    truncate: Truncate = None,
    unit: Unit = "sequence",
    doc_field: DocField = None,
    seq_words: SeqWords = None,
    max_seqs: MaxSeqs = None,
    di_power: DiPower = None,
    di_effect_auc: DiEffectAuc = None,
    meeus_features: MeeusFeatures = None,
    min_words: MinWords = None,
    n_per_label: NPerLabel = None,
    limit: Limit = None,
    breakdown: Breakdown = None,
    seed: Int = 0,
    bootstrap: Bootstrap = 1000,
    device: Device = "auto",
    dtype: Dtype = "auto",
    max_length: MaxLength = None,
    token_budget: TokenBudget = None,
    start_token: StartToken = "auto",
    cache: Cache = None,
    no_blind: NoBlind = False,
    on_bad: OnBad = "raise",
    overwrite: Overwrite = False,
    api_base: ApiBase = None,
    api_mode: ApiMode = "completions",
    api_key_env: ApiKeyEnv = "OPENAI_API_KEY",
    api_concurrency: ApiConcurrency = 8,
    api_top_k: ApiTopK = None,
    api_timeout: ApiTimeout = 60.0,
    api_max_retries: ApiMaxRetries = 6,
    executor_kind: ExecutorKind = "local",
    address: Address = None,
    workers: Workers = None,
    worker_cpus: WorkerCpus = 1,
) -> None:
    """Run membership inference attacks and write a report folder."""
    options = dict(locals())  # first: the options alone
    options.pop("ctx")
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


def _run(ctx: typer.Context, options: dict[str, Any]) -> tuple[Any, bool]:
    """The run of the command line's ``options`` after ``--config``, ``--limit`` and lm-eval's
    model spelling are read, and whether its folder is a new default one (reserved here, and
    released if the run fails)."""
    from imprint.cli.flags import lm_eval_model, n_per_label_from_limit
    from imprint.cli.run_file import read_run_file
    from imprint.outdir import default_run_dir, release_run_dir

    config = options.pop("config")
    if config is not None:
        hints = typing.get_type_hints(run.__wrapped__)  # type: ignore[attr-defined]
        options.update(read_run_file(config, ctx, hints))
    for name in ("model", "data"):
        if options[name] is None:
            raise typer.BadParameter(
                "missing: give it on the command line or in --config", param_hint=f"--{name}"
            )
    options["n_per_label"] = n_per_label_from_limit(options.pop("limit"), options["n_per_label"])
    pairs = split_model_args(options["model_arg"])
    options["model"], options["model_arg"], note = lm_eval_model(options["model"], pairs)
    if note:
        say(note)
    reserved = options["out"] is None
    if reserved:  # a new folder per run, reserved now: no run replaces another unasked
        options["out"] = default_run_dir(options["model"], options["data"])
    try:
        return run_attacks(console=console, **_run_config(options)), reserved
    except BaseException:
        if reserved:
            release_run_dir(options["out"])  # an empty reservation, left by a failed run
        raise


def _as_flags(err: ImprintError, ctx: typer.Context) -> ImprintError:
    """``err`` with the Python names of run options (``n_per_label``) written as the flags
    (``--n-per-label``); an error whose message is built otherwise is kept as it is."""
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
