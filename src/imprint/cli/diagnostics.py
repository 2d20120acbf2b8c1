"""Benchmark-validity commands: ``blind``, ``overlap build|add|merge|score``, ``data filter``,
``perturb``, ``perturb-table`` and ``compare``. The work is done by :mod:`imprint.diagnostics`;
these functions parse options, call it and print tables."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from imprint.cli.common import (
    add_row,
    check_out_file,
    check_out_folder,
    console,
    handle_errors,
    parse_list,
    progress_bars,
    run_attacks,
    say,
    table,
    warn,
    write_json,
)
from imprint.cli.tables import print_blind, print_index, transfer_cell
from imprint.cli.temporal import build_temporal_command

__all__ = [
    "blind",
    "compare",
    "data_app",
    "data_filter",
    "overlap_app",
    "perturb",
    "perturb_table",
]

TextField = Annotated[str | None, typer.Option(help="text field of the data file")]
LabelField = Annotated[str | None, typer.Option(help="label field of the data file")]
Truncate = Annotated[int | None, typer.Option(help="truncate texts to N words")]
MinWords = Annotated[int | None, typer.Option(help="drop texts under N words")]
Seed = Annotated[int, typer.Option()]
Bootstrap = Annotated[int, typer.Option(help="bootstrap resamples")]
Corpus = Annotated[list[Path], typer.Option(help="corpus file (repeatable)")]
MoreCorpus = Annotated[list[Path] | None, typer.Argument(help="more corpus files")]
CandidateData = Annotated[str, typer.Option(help="candidate data spec")]
Overwrite = Annotated[bool, typer.Option("--overwrite", help="replace an existing --out output")]
PERTURB_FILES = ("perturbed.jsonl", "perturbed.manifest.json")
TABLE_FILES = ("perturbation_table.json", "perturbation_histograms.png")

overlap_app = typer.Typer(
    no_args_is_help=True,
    help="n-gram overlap of candidate texts with a training corpus (Bloom filters).",
)
data_app = typer.Typer(no_args_is_help=True, help="Data transforms.")
data_app.command("build-temporal")(build_temporal_command)


# -- blind ----------------------------------------------------------------------------------------


@handle_errors
def blind(
    data: Annotated[str, typer.Option(help="data spec: file, wikimia:32, ...")],
    seed: Seed = 0,
    folds: Annotated[int, typer.Option(help="stratified cross-validation folds")] = 5,
    bootstrap: Bootstrap = 1000,
    baseline: Annotated[list[str], typer.Option(help="run only these baselines (repeatable)")] = [],  # noqa: B006
    out: Annotated[Path | None, typer.Option(help="write the results as JSON")] = None,
    text_field: TextField = None,
    label_field: LabelField = None,
    truncate: Truncate = None,
    min_words: MinWords = None,
    overwrite: Overwrite = False,
) -> None:
    """Model-less blind baselines (SoK forest, TF-IDF, dates, greedy n-grams), cross-validated.

    The texts go through the transforms of ``imprint run`` (exact dedupe; a text under both
    labels is dropped in every copy), so both judge the same samples; drops are printed."""
    from imprint.diagnostics.blind_suite import blind_suite_warning, run_blind_suite, suite_verdict
    from imprint.diagnostics.inputs import evaluation_samples
    from imprint.report.blind_band import said_after_verdict
    from imprint.report.terminal import event

    config = {"command": "blind", "data": data, "seed": seed, "folds": folds,
              "bootstrap": bootstrap, "baselines": sorted(baseline), "text_field": text_field,
              "label_field": label_field, "truncate": truncate, "min_words": min_words}  # fmt: skip
    from imprint.errors import ConfigError, DataError

    if folds < 2:  # named by the flag, before any data is read
        raise ConfigError(f"--folds must be 2 or more, got {folds}")
    if bootstrap < 1:
        raise ConfigError(f"--bootstrap must be 1 or more (1000 is customary), got {bootstrap}")
    if check_out_file(out, overwrite=overwrite, config=config):  # before the suite, not after
        say(f"--out {out} holds the output of this same configuration: it is rewritten")
    found = evaluation_samples(
        data, text_field=text_field, label_field=label_field, truncate=truncate, min_words=min_words
    )
    for message in found.warnings:
        warn(message)
    if found.dropped:
        shown = ", ".join(f"{n} {reason}" for reason, n in found.dropped.items())
        say(f"dropped {sum(found.dropped.values())} of {found.n_loaded} texts: {shown}")
    counts = [sum(s.label == c for s in found.samples) for c in (1, 0)]
    if 0 < min(counts) < folds:
        raise DataError(
            f"--folds {folds} needs at least {folds} texts per class; {data} has {counts[0]} "
            f"members and {counts[1]} non-members after dedupe. Add texts or lower --folds"
        )
    results = run_blind_suite(
        [s.text for s in found.samples],
        [s.label for s in found.samples],
        seed=seed,
        n_folds=folds,
        n_bootstrap=bootstrap,
        baselines=baseline or None,
    )
    print_blind(results, f"blind baselines on {data} ({folds}-fold out-of-fold, 95 % CI)")
    verdict = suite_verdict(results)  # the run report's rule: three states
    if verdict is not None:
        say(verdict.summary)
    warning = blind_suite_warning(results)
    rest = said_after_verdict(verdict, warning or "")  # under the verdict's line, not its words
    if warning and rest is not None:
        event("warning", message=warning)  # the whole sentence, as --out's file keeps it
        say(rest, label="warning:", style="bold yellow")
    elif warning:
        warn(warning)
    if out is not None:
        write_json(out, _blind_payload(config, found, results, warning))


def _blind_payload(
    config: dict[str, Any], found: Any, results: list[Any], warning: str | None
) -> dict[str, Any]:
    from imprint.diagnostics.blind_suite import measured_dict, selected_summary, suite_verdict

    selected = selected_summary(results)
    verdict = suite_verdict(results)
    return {
        "config": config,  # the same command again rewrites this file (check_out_file)
        "data": config["data"],
        "evaluated": len(found.samples),
        "dropped": found.dropped,
        "strongest": selected[0].name if selected else None,
        # the strongest's metrics with intervals adjusted for picking it (None if none)
        "strongest_adjusted": measured_dict(selected[1]) if selected else None,
        "warning": warning,
        "verdict": None if verdict is None else verdict.to_dict(),
        "baselines": [r.to_dict() for r in results],
    }


# -- overlap --------------------------------------------------------------------------------------


@overlap_app.command("build")
@handle_errors
def overlap_build(
    corpus: Corpus,
    out: Annotated[Path, typer.Option(help="index folder to write")],
    more: MoreCorpus = None,
    n: Annotated[list[int], typer.Option("--n", help="n-gram length (repeatable)")] = [7],  # noqa: B006
    fp_rate: Annotated[float, typer.Option(help="target false-positive rate")] = 0.01,
    capacity: Annotated[
        int | None, typer.Option(help="n-grams per filter; default: counted in a first pass")
    ] = None,
    text_field: Annotated[str | None, typer.Option(help="JSON text field")] = None,
    unit: Annotated[str, typer.Option(help="plain text: 'line' or 'paragraph'")] = "line",
    measure: Annotated[bool, typer.Option(help="measure the false-positive rate")] = True,
    max_memory_gb: Annotated[float | None, typer.Option(help="refuse larger filters")] = None,
    overwrite: Annotated[bool, typer.Option(help="replace an existing index")] = False,
    executor: Annotated[str, typer.Option(help="local, or ray: corpus shards on Ray")] = "local",
    address: Annotated[str | None, typer.Option(help="Ray cluster (auto, ray://H:P)")] = None,
    workers: Annotated[int | None, typer.Option(help="Ray: shards per file")] = None,
) -> None:
    """Build Bloom filters of the corpus's word n-grams (JSONL/text, gzip/zstd, streamed)."""
    from imprint.diagnostics.overlap import build_index
    from imprint.executors import ExecutorConfig

    where = ExecutorConfig(kind=executor, address=address, workers=workers)  # Ray checked now
    with progress_bars() as progress:
        manifest = build_index(
            [*corpus, *(more or [])],
            n,
            out,
            fp_rate=fp_rate,
            capacity=capacity,
            text_field=text_field,
            unit=unit,  # type: ignore[arg-type]
            measure_fp=measure,
            max_memory_gb=max_memory_gb,
            progress=progress,
            overwrite=overwrite,
            executor=where,
        )
    print_index(manifest, out)


@overlap_app.command("add")
@handle_errors
def overlap_add(
    index: Annotated[Path, typer.Option(help="index folder to extend in place")],
    corpus: Corpus,
    more: MoreCorpus = None,
) -> None:
    """Add corpus files to an existing index (filters updated incrementally)."""
    from imprint.diagnostics.overlap import extend_index

    with progress_bars() as progress:
        manifest = extend_index(index, [*corpus, *(more or [])], progress=progress)
    print_index(manifest, index)


@overlap_app.command("merge")
@handle_errors
def overlap_merge(
    indexes: Annotated[list[Path], typer.Argument(help="shard index folders")],
    out: Annotated[Path, typer.Option(help="merged index folder")],
    overwrite: Annotated[bool, typer.Option()] = False,
) -> None:
    """Union shard indexes built with the same --n, --fp-rate and --capacity."""
    from imprint.diagnostics.overlap import merge_indexes

    print_index(merge_indexes(indexes, out, overwrite=overwrite), out)


@overlap_app.command("score")
@handle_errors
def overlap_score(
    index: Annotated[Path, typer.Option(help="index folder")],
    data: CandidateData,
    n: Annotated[list[int], typer.Option("--n", help="n to score (default: all)")] = [],  # noqa: B006
    out: Annotated[Path | None, typer.Option(help="per-sample JSONL; also .summary.json")] = None,
    plot: Annotated[Path | None, typer.Option(help="histogram PNG (default: beside --out)")] = None,
    text_field: TextField = None,
    label_field: LabelField = None,
) -> None:
    """overlap_n(x): the fraction of each candidate's n-grams found in the corpus."""
    from imprint.diagnostics.inputs import load_candidates
    from imprint.diagnostics.overlap import NgramIndex
    from imprint.diagnostics.overlap_summary import overlap_report, write_overlap_rows
    from imprint.diagnostics.plots import plot_overlap_histograms

    for path in (out, plot):  # replaced as before, but never a file of another output
        check_out_file(path, overwrite=True, option="--out" if path is out else "--plot")
    opened = NgramIndex.open(index, n or None)
    loaded = load_candidates(data, text_field=text_field, label_field=label_field)
    report = overlap_report(opened, loaded.samples, data=data)
    columns = ("n", "mean (members)", "mean (non-members)", "undefined")
    shown = table(f"n-gram overlap of {data} with {index}", columns)
    for k, row in report.summary["n"].items():
        means = (f"{m:.4f}" if m is not None else "-" for m in row["mean"].values())
        add_row(shown, k, *means, f"{row['undefined']} (fewer than {k} words)")
    console.print(shown)
    if out is not None:
        write_overlap_rows(out, report)
        write_json(out.with_name(out.stem + ".summary.json"), report.summary)
        plot = plot or out.with_suffix(".png")
    if plot is not None:
        values = {k: r.values for k, r in report.results.items()}
        plot_overlap_histograms(values, report.labels, plot)
        say(f"wrote {plot}")


# -- data filter ----------------------------------------------------------------------------------


@data_app.command("filter")
@handle_errors
def data_filter(
    data: CandidateData,
    index: Annotated[Path, typer.Option(help="n-gram index folder")],
    out: Annotated[Path, typer.Option(help="filtered JSONL to write")],
    n: Annotated[int | None, typer.Option("--n", help="n-gram length")] = None,
    max_overlap: Annotated[float | None, typer.Option(help="largest overlap kept")] = None,
    preset: Annotated[
        str | None, typer.Option(help="ngram_13_0.8 (decontaminate), ngram_7_0.2, ngram_13_0.2")
    ] = None,
    undefined: Annotated[str, typer.Option(help="non-members shorter than n: drop|keep")] = "drop",
    text_field: TextField = None,
    label_field: LabelField = None,
) -> None:
    """Keep non-members with n-gram overlap <= a bound (thresholded or decontaminated sets)."""
    from imprint.diagnostics.decontam import filter_by_overlap, resolve_bound, write_filtered
    from imprint.diagnostics.inputs import load_candidates
    from imprint.diagnostics.overlap import NgramIndex

    n, max_overlap = resolve_bound(preset, n, max_overlap)
    check_out_file(out, overwrite=True)  # replaced as before, but never a file of another output
    loaded = load_candidates(data, text_field=text_field, label_field=label_field)
    kept, removed, summary = filter_by_overlap(
        loaded.samples,
        NgramIndex.open(index, [n]),
        n=n,
        max_overlap=max_overlap,
        undefined=undefined,  # type: ignore[arg-type]
    )
    manifest = write_filtered(out, kept, removed, summary, source=data, index=index)
    removed_text = ", ".join(f"{v} {k}" for k, v in summary["removed"].items()) or "none"
    say(
        f"kept {summary['members']} members and {summary['nonmembers_kept']} of "
        f"{summary['nonmembers_in']} non-members; removed: {removed_text}"
    )
    say(f"wrote {out} and {manifest}")


# -- perturbations and run comparisons ------------------------------------------------------------


@handle_errors
def perturb(
    data: CandidateData,
    out: Annotated[Path, typer.Option(help="output folder")],
    edits: Annotated[str, typer.Option(help="word edit distances")] = "1,10,25",
    neighbour_fraction: Annotated[float, typer.Option(help="0 disables")] = 0.05,
    paraphrase_model: Annotated[str | None, typer.Option(help="local model to paraphrase")] = None,
    paraphrase_prompt: Annotated[str | None, typer.Option(help="prompt with {text}")] = None,
    max_new_tokens: Annotated[int, typer.Option(help="paraphrase length cap")] = 256,
    model: Annotated[str | None, typer.Option(help="target model: also run the attacks")] = None,
    attacks: Annotated[str, typer.Option(help="comma-separated attacks (with --model)")] = "all",
    device: Annotated[str, typer.Option()] = "auto",
    dtype: Annotated[str, typer.Option()] = "auto",
    seed: Seed = 0,
    bootstrap: Annotated[int, typer.Option(help="bootstrap resamples of the run")] = 1000,
    text_field: TextField = None,
    label_field: LabelField = None,
    overwrite: Overwrite = False,
) -> None:
    """Write perturbed members (word edits, neighbours, paraphrases) and, with --model, the
    FPR they get at thresholds set on natural non-members (MIMIR Table 4)."""
    from imprint.diagnostics.inputs import load_candidates
    from imprint.diagnostics.perturb import PARAPHRASE_PROMPT, write_perturbed
    from imprint.outdir import mark_output

    distances = parse_list(edits, option="--edits", convert=int, example="1,10,25")
    names = parse_list(attacks, option="--attacks", example="loss,zlib")
    writes = PERTURB_FILES + (TABLE_FILES if model else ())
    check_out_folder(out, writes=writes, overwrite=overwrite, kind="perturb")  # before any work
    loaded = load_candidates(data, text_field=text_field, label_field=label_field)
    generate = None
    if paraphrase_model:
        generate = _stored_paraphraser(paraphrase_model, max_new_tokens, device, dtype)
    made = write_perturbed(
        loaded.samples,
        out,
        source=data,
        edits=distances,
        neighbour_fraction=neighbour_fraction,
        paraphraser=generate,
        prompt=paraphrase_prompt or PARAPHRASE_PROMPT,
        seed=seed,
    )
    mark_output(out, "perturb")
    say(f"wrote {made.manifest}")
    say(
        f"wrote {made.dataset}: {made.n_rows} rows; made {made.summary['made']}, "
        f"skipped {made.summary['skipped'] or 'none'}"
    )
    if model is None:
        say(
            f"next: imprint run --data {made.dataset} --model MODEL --out RUN; "
            "then imprint perturb-table RUN"
        )
        return
    settings = {"seed": seed, "n_bootstrap": bootstrap, "device": device, "dtype": dtype}
    run_attacks(
        console=console, model=model, data=str(made.dataset), out=out / "run", attacks=names,
        blind=False, **settings,
    )  # fmt: skip
    perturb_table(out / "run", out=out)


def _stored_paraphraser(
    spec: str, max_new_tokens: int, device: str, dtype: str
) -> Callable[[str], str]:
    """A local model's paraphrases, stored as paraphrase requests: a rerun asks nothing again."""
    from imprint.backends.models import default_cache_path
    from imprint.diagnostics.perturb import hf_generator
    from imprint.requests import RequestStore
    from imprint.requests.client import stored_generator

    return stored_generator(
        lambda: hf_generator(spec, max_new_tokens=max_new_tokens, device=device, dtype=dtype),
        spec=spec,
        store=RequestStore(default_cache_path()),
        max_tokens=max_new_tokens,
    )


def fraction(item: str) -> float:
    """A number in [0, 1] (an FPR), else ValueError (``parse_list`` names the option)."""
    value = float(item)
    if not 0.0 <= value <= 1.0:  # NaN fails too
        raise ValueError(item)
    return value


@handle_errors
def perturb_table(
    run: Annotated[Path, typer.Argument(help="run folder scored on a perturbed dataset")],
    out: Annotated[Path | None, typer.Option(help="folder for the table and plot")] = None,
) -> None:
    """FPR of perturbed members at thresholds fixed on natural non-members, per attack."""
    from imprint.diagnostics.plots import plot_group_histograms
    from imprint.diagnostics.runs import perturbation_groups, perturbation_table, read_run

    check_out_folder(out or run, writes=(), option="--out" if out else "RUN")  # a file: refused
    result = perturbation_table(run).to_dict()  # the JSON form, rendered and written
    scores = read_run(run)
    folder = out or run
    title = "rate called member at thresholds set on natural non-members"
    shown = table(title, ("attack", "target FPR", *result["groups"]))
    notes: dict[str, str] = {}
    for attack, row in result["attacks"].items():
        notes.update(row["not_measurable"])
        for key in row["thresholds"]:
            cells = [row["rates"][g][key] for g in result["groups"]]
            shown_cells = ("-" if c is None else f"{c:.3f}" for c in cells)
            if key in row["not_measurable"]:
                shown_cells = ("n/m" for _ in cells)
            add_row(shown, attack, key, *shown_cells)
    console.print(shown)
    for key, reason in notes.items():
        say(f"n/m = not measurable at target FPR {key}: {reason}")
    write_json(folder / "perturbation_table.json", result)
    plot = plot_group_histograms(
        scores.scores,
        perturbation_groups(scores),
        folder / "perturbation_histograms.png",
        order=result["groups"],
    )
    say(f"wrote {plot}")


@handle_errors
def compare(
    run_a: Annotated[Path, typer.Argument(help="run folder A (thresholds are set here)")],
    run_b: Annotated[Path, typer.Argument(help="run folder B")],
    out: Annotated[Path | None, typer.Option(help="JSON file to write")] = None,
    fprs: Annotated[str, typer.Option(help="target FPRs on A")] = "0.01,0.05,0.1",
    bootstrap: Annotated[int, typer.Option(help="resamples for the AUC difference")] = 1000,
    seed: Seed = 0,
    overwrite: Overwrite = False,
) -> None:
    """Thresholds fixed at x % FPR on A's non-members: the FPR on B's (MIMIR Table 5), and
    AUC(B) - AUC(A) on the samples both runs share (paired by id: DeLong's paired test,
    Bonferroni over the attacks; the paired bootstrap in the JSON)."""
    from imprint.diagnostics.runs import compare_runs

    targets = parse_list(fprs, option="--fprs", convert=fraction, example="0.01,0.05,0.1")
    if len(set(targets)) != len(targets):
        raise typer.BadParameter(f"{fprs!r} repeats an FPR; give each once", param_hint="--fprs")
    check_out_file(out, overwrite=overwrite)  # before the bootstrap, not after it
    result = compare_runs(run_a, run_b, fprs=targets, n_resamples=bootstrap, seed=seed).to_dict()
    columns = ("attack", *(f"FPR on B @{f:g}" for f in targets), "AUC A", "AUC B", "B - A",
               "p (Bonf.)")  # fmt: skip
    shown = table(f"thresholds from {run_a} applied to {run_b}", columns)
    notes: dict[str, str] = {}
    for attack, row in result["attacks"].items():
        if "error" in row:
            add_row(shown, attack, *(["-"] * len(targets)), "-", "-", row["error"], "-")
            continue
        notes.update(
            {k: c["not_measurable"] for k, c in row["transfer"].items() if c.get("not_measurable")}
        )
        a, b, d = (row["auc"][k] for k in ("a", "b", "diff"))
        add_row(
            shown,
            attack,
            *(transfer_cell(cell) for cell in row["transfer"].values()),
            f"{a['estimate']:.3f}",
            f"{b['estimate']:.3f}",
            f"{d['estimate']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]",
            _p_cell(row["auc"]),
        )
    console.print(shown)
    say(_pairing_note(result))
    for key, reason in notes.items():
        say(f"n/m = not measurable @{key}: {reason}")
    if out is not None:
        write_json(out, result)


def _p_cell(auc: dict[str, Any]) -> str:
    """The Bonferroni-adjusted p of a paired difference; 'indep.' when the runs could not be
    paired (the difference then comes from independent resamples)."""
    if auc.get("method") != "paired":
        return "indep."
    p = auc.get("p_adjusted")
    return "-" if p is None else f"{p:.3g}"


def _pairing_note(result: dict[str, Any]) -> str:
    pairing = result["pairing"]
    return (
        f"AUC differences: {pairing['description']}; tested on the shared "
        f"{pairing['resamples']} (DeLong paired, 95 % interval; p Bonferroni-adjusted over the "
        "attacks; 'indep.': too few shared samples, runs resampled independently)"
    )
