"""Every ``imprint run`` option, declared once: name, type, default, help and flag spellings.

:class:`RunOptions` is the command's typed input. Its fields are the flags as the command line
names them (text lists stay text; :func:`imprint.cli.run.run_config_kwargs` parses them into a
:class:`~imprint.run.RunConfig`). From it are derived: the command's signature (typer reads it:
:func:`imprint.cli.run.run`), the keys ``--config run.yaml`` takes, and the flag that an error
names. The four options every local model takes (``device``, ``dtype``, ``max_length``,
``start_token``) come from :class:`~imprint.backends.shared_options.SharedModelOptions`, where
the providers, ``RunConfig.shared_args`` and the experiment file's ``settings`` read them too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from imprint.backends.shared_options import SharedModelOptions, option

__all__ = ["RunOptions"]


@dataclass(frozen=True, kw_only=True)
class RunOptions(SharedModelOptions):
    """The options of one ``imprint run``, typed, as the command line gave them."""

    model: str | None = option(
        None,
        "target (required): alias, folder, hf:ID or a hub id (owner/name, or a name such as "
        "gpt2), gguf:PATH, vllm:SPEC, game:DIR, openai:MODEL (with --api-base; there any name is "
        "the API's model name); lm-eval's --model hf --model-args pretrained=ID reads as hf:ID",
    )
    data: str | None = option(None, "data (required): file, wikimia:32, hf:ID, game:DIR")
    config: Path | None = option(
        None,
        "a YAML file of run flags, one per line without the dashes (n-per-label: 20; lists for "
        "repeatable flags); flags on the command line win; an unknown key is refused",
    )
    attacks: str = option("all", "comma-separated attacks, or 'all'")
    ref: tuple[str, ...] = option((), "reference model NAME=SPEC (repeatable)")
    references: str | None = option(
        None,
        "reference models with known training data for lira/rmia: a game folder built with "
        "--reference-models K, or a training manifest (.json/.yaml)",
    )
    allow_unmatched_ids: bool = option(
        False,
        "accept --references ids that match no sample of the run (counted in the manifest and "
        "report); by default they are refused",
        "--allow-unmatched-ids",
    )
    model_arg: tuple[str, ...] = option(
        (),
        "options of the target's backend as lm-eval takes them, KEY=VALUE[,KEY=VALUE...] "
        "(repeatable), e.g. --model-args dtype=bfloat16,max_length=512; vllm: "
        "tensor_parallel_size=2; a wrong key lists the ones it takes; a comma followed by text "
        "without '=' stays in the value (stop=a,b), and an empty item inside a value is refused",
        "--model-args",
        "--model-arg",
        "--model_args",
    )
    out: Path | None = option(
        None,
        "run folder to write (a new one; an earlier run is rewritten if it has the same "
        "configuration, else replaced only with --overwrite); default: a new "
        "runs/<YYYYmmdd-HHMMSS>-<model>-<data>, with runs/latest linked to it",
    )
    param: tuple[str, ...] = option((), "ATTACK.PARAM=VALUE (repeatable)")
    pool: tuple[str, ...] = option((), "NAME=DATA pool for shots (repeatable)")
    shot_holdout: int = option(
        10,
        "non-member shots held out of EVERY attack's evaluation (whichever attacks run) for "
        "recall, con_recall, simmia: from --pool nonmembers, else natural evaluation non-members "
        "when there are at least twice as many; 0: none",
    )
    text_field: str | None = option(None, "the data's text field (default: text, input ...)")
    label_field: str | None = option(None, "the data's label field, 1 = member (default: label)")
    truncate: int | None = option(
        None, "truncate texts to N words", "--truncate", "--truncate-words"
    )
    unit: str = option(
        "sequence",
        "sequence, or document: each row (or --doc-field group) is a document, split into "
        "--max-seqs sequences of --seq-words words, scored, then aggregated per document",
    )
    doc_field: str | None = option(
        None, "with --unit document: rows sharing this field are one document"
    )
    # the document flags default to None ("not given", shown in --help as the default they take)
    # so that --unit sequence refuses each one typed, even at its default value
    seq_words: int | None = option(None, "with --unit document: words per sequence (default 200)")
    max_seqs: int | None = option(None, "with --unit document: sequences per document (default 25)")
    di_power: float | None = option(
        None,
        "with --unit document: the power dataset inference's verdict asks for (default 0.8); "
        "under it the verdict is 'inconclusive' with the documents needed",
    )
    di_effect_auc: float | None = option(
        None,
        "with --unit document: the smallest effect worth detecting, as a document AUC (default "
        "0.6); 'not detected' needs enough documents to find it with --di-power",
    )
    meeus_features: str | None = option(
        None, "with --unit document: Meeus et al. features: agg (the authors', default), hist, both"
    )
    min_words: int | None = option(None, "drop texts under N words")
    n_per_label: int | None = option(None, "sample N members, N non-members")
    limit: int | None = option(
        None,
        "lm-eval's name for a quick run: N texts in all, N/2 members and N/2 non-members (the "
        "same as --n-per-label N/2; N even)",
    )
    breakdown: str | None = option(None, "meta field to break AUC down by")
    seed: int = option(0, "seed of every random choice (sampling, bootstrap, shots)")
    bootstrap: int = option(1000, "bootstrap resamples", "--bootstrap", "--n-bootstrap")
    token_budget: int | None = option(
        None,
        "padded tokens per forward; default auto: 4096 on CPU, sized from free GPU memory on CUDA",
    )
    cache: Path | None = option(None, "signal cache (SQLite) path")
    no_blind: bool = option(False, "skip the blind baseline", "--no-blind")
    on_bad: str = option(
        "raise",
        "a bad data row: raise (stop, naming file and line) or drop (drop it and count it in the "
        "manifest and report)",
    )
    overwrite: bool = option(
        False,
        "replace the --out folder: an earlier run, or a folder imprint did not write (deletes it)",
        "--overwrite",
    )
    api_base: str | None = option(
        None, "OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1 (black-box)"
    )
    api_mode: str = option("completions", "completions or chat")
    api_key_env: str = option(
        "OPENAI_API_KEY", "environment variable holding the API key (never stored)"
    )
    api_concurrency: int = option(8, "requests in flight at once")
    api_top_k: int | None = option(None, "send top_k (servers that accept it: vLLM, llama.cpp)")
    api_timeout: float = option(60.0, "seconds per API request attempt")
    api_max_retries: int = option(
        6, "retries per API request (429, 5xx, timeouts) before the run stops"
    )
    executor_kind: str = option(
        "local", "where model work runs: local (this process) or ray", "--executor"
    )
    address: str | None = option(
        None,
        "Ray cluster: auto (joins `ray start --head` here) or ray://HOST:10001; default: a "
        "private Ray on this machine",
    )
    workers: int | None = option(
        None, "Ray model replicas; default one per GPU, else one per --worker-cpus cores"
    )
    worker_cpus: int = option(1, "cores per Ray CPU replica (its torch threads)")
