"""Typer commands of the benchmark-validity diagnostics, to mount in the main CLI.

``blind``, ``data_filter``, ``perturb``, ``perturb_table`` and ``compare`` are plain command
functions (``app.command("blind")(blind)``); ``overlap_app`` is a sub-app
(``app.add_typer(overlap_app, name="overlap")``). ``diagnostics_app`` mounts them all, for tests
and stand-alone use.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from imprint.errors import ImprintError

console = Console()

TextField = Annotated[str | None, typer.Option(help="text field of the data file")]
LabelField = Annotated[str | None, typer.Option(help="label field of the data file")]


def _fail(err: Exception) -> NoReturn:
    console.print(f"[bold red]error:[/] {err}")
    raise typer.Exit(2)


def _fmt(interval: Any) -> str:
    if interval is None or math.isnan(interval.estimate):
        return "-"
    return f"{interval.estimate:.3f} [{interval.low:.3f}, {interval.high:.3f}]"


def _write_json(path: Path, payload: dict[str, Any]) -> None:
    from imprint.report import to_jsonable

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(to_jsonable(payload), indent=2) + "\n")
    console.print(f"wrote {path}")


def _load(data: str, text_field: str | None, label_field: str | None) -> Any:
    from imprint.data import resolve_data

    return resolve_data(data, text_field=text_field, label_field=label_field)


def _evaluation_samples(
    data: str,
    text_field: str | None,
    label_field: str | None,
    truncate: int | None,
    min_words: int | None,
) -> tuple[list[Any], dict[str, int]]:
    """The samples ``imprint run`` would evaluate (same transforms, same dedupe), with the drops
    counted and printed (a label conflict also names the ids)."""
    from imprint.data import apply_transforms

    loaded = _load(data, text_field, label_field)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        samples, dropped = apply_transforms(
            loaded.samples, truncate=truncate, min_words=min_words, dedupe=True
        )
    dropped = {**loaded.dropped, **dropped}
    for warning in caught:
        console.print(f"[bold yellow]warning:[/] {warning.message}")
    if dropped:
        shown = ", ".join(f"{n} {reason}" for reason, n in dropped.items())
        console.print(f"dropped {sum(dropped.values())} of {len(loaded.samples)} texts: {shown}")
    return list(samples), dropped


def blind(
    data: Annotated[str, typer.Option(help="data spec: file, wikimia:32, ...")],
    seed: Annotated[int, typer.Option()] = 0,
    folds: Annotated[int, typer.Option(help="stratified cross-validation folds")] = 5,
    bootstrap: Annotated[int, typer.Option(help="bootstrap resamples")] = 1000,
    baseline: Annotated[list[str], typer.Option(help="run only these baselines (repeatable)")] = [],  # noqa: B006
    out: Annotated[Path | None, typer.Option(help="write the results as JSON")] = None,
    text_field: TextField = None,
    label_field: LabelField = None,
    truncate: Annotated[int | None, typer.Option(help="truncate texts to N words")] = None,
    min_words: Annotated[int | None, typer.Option(help="drop texts under N words")] = None,
) -> None:
    """Model-less blind baselines (SoK forest, TF-IDF, dates, greedy n-grams), cross-validated.

    The texts go through the transforms of ``imprint run`` (exact dedupe; a text under both
    labels is dropped in every copy), so both judge the same samples; drops are printed."""
    from imprint.diagnostics.blind_suite import (
        blind_suite_warning,
        run_blind_suite,
        selected_summary,
    )

    try:
        samples, dropped = _evaluation_samples(data, text_field, label_field, truncate, min_words)
        results = run_blind_suite(
            [s.text for s in samples],
            [s.label for s in samples],
            seed=seed,
            n_folds=folds,
            n_bootstrap=bootstrap,
            baselines=baseline or None,
        )
    except (ImprintError, ValueError) as err:
        _fail(err)
    table = Table(title=f"blind baselines on {data} ({folds}-fold out-of-fold, 95 % CI)")
    for col in ("baseline", "AUC", "TPR@1%FPR", "TPR@5%FPR", "top features"):
        table.add_column(col)
    for r in results:
        tpr = r.summary.tpr_at_fpr if r.summary else {}
        feats = ", ".join(f"{f} ({w:+.2g})" for f, w in r.top_features[:5])
        if r.protocol_auc:
            feats += (
                f"; SoK protocol split AUCs {r.protocol_auc[0]:.3f} ± {r.protocol_auc[1]:.3f} "
                "sd (a spread, not an interval)"
            )
        table.add_row(
            r.name,
            _fmt(r.summary.auc if r.summary else None),
            _fmt(tpr.get(0.01)),
            _fmt(tpr.get(0.05)),
            r.error or feats,
        )
    console.print(table)
    selected = selected_summary(results)
    best = selected[0] if selected else None
    if selected is not None:
        _, summary, m = selected
        how = f", Bonferroni {summary.confidence:.2%} interval: best of {m}" if m > 1 else ""
        console.print(f"strongest: {selected[0].name} (AUC {_fmt(summary.auc)}{how})")
    warning = blind_suite_warning(results)
    if warning:
        console.print(f"[bold yellow]warning:[/] {warning}")
    if out is not None:
        _write_json(
            out,
            {
                "data": data,
                "evaluated": len(samples),
                "dropped": dropped,
                "strongest": best.name if best else None,
                # the strongest's metrics with intervals adjusted for picking it (None if none)
                "strongest_adjusted": selected[1].to_dict() if selected else None,
                "warning": warning,
                "baselines": [r.to_dict() for r in results],
            },
        )


overlap_app = typer.Typer(
    no_args_is_help=True,
    help="n-gram overlap of candidate texts with a training corpus (Bloom filters).",
)


@overlap_app.command("build")
def overlap_build(
    corpus: Annotated[list[Path], typer.Option(help="corpus file (repeatable)")],
    out: Annotated[Path, typer.Option(help="index folder to write")],
    more: Annotated[list[Path] | None, typer.Argument(help="more corpus files")] = None,
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
) -> None:
    """Build Bloom filters of the corpus's word n-grams (JSONL/text, gzip/zstd, streamed)."""
    from imprint.diagnostics.overlap import build_index

    try:
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
            progress=True,
            overwrite=overwrite,
        )
    except (ImprintError, ValueError) as err:
        _fail(err)
    _print_index(manifest, out)


def _print_index(manifest: dict[str, Any], out: Path) -> None:
    table = Table(title=f"n-gram index {out}")
    for col in ("n", "capacity", "inserted", "MB", "k", "fp@capacity", "fp est.", "fp measured"):
        table.add_column(col)
    for n, f in manifest["filters"].items():
        measured = f.get("fp_rate_measured")
        table.add_row(
            n,
            f"{f['capacity']:,}",
            f"{f['n_inserted']:,}",
            f"{f['size_bytes'] / 1e6:.1f}",
            str(f["k"]),
            f"{f['fp_rate_at_capacity']:.4f}",
            f"{f['fp_rate_estimated']:.4f}",
            "-" if measured is None else f"{measured:.4f}",
        )
    console.print(table)
    for c in manifest["corpus"]:
        skipped = ", ".join(f"{v} {k}" for k, v in c["skipped"].items()) or "none"
        console.print(f"{c['path']}: {c['documents']:,} documents; skipped lines: {skipped}")


@overlap_app.command("add")
def overlap_add(
    index: Annotated[Path, typer.Option(help="index folder to extend in place")],
    corpus: Annotated[list[Path], typer.Option(help="corpus file (repeatable)")],
    more: Annotated[list[Path] | None, typer.Argument(help="more corpus files")] = None,
) -> None:
    """Add corpus files to an existing index (filters updated incrementally)."""
    from imprint.diagnostics.overlap import extend_index

    try:
        manifest = extend_index(index, [*corpus, *(more or [])], progress=True)
    except (ImprintError, ValueError) as err:
        _fail(err)
    _print_index(manifest, index)


@overlap_app.command("merge")
def overlap_merge(
    indexes: Annotated[list[Path], typer.Argument(help="shard index folders")],
    out: Annotated[Path, typer.Option(help="merged index folder")],
    overwrite: Annotated[bool, typer.Option()] = False,
) -> None:
    """Union shard indexes built with the same --n, --fp-rate and --capacity."""
    from imprint.diagnostics.overlap import merge_indexes

    try:
        manifest = merge_indexes(indexes, out, overwrite=overwrite)
    except (ImprintError, ValueError) as err:
        _fail(err)
    _print_index(manifest, out)


@overlap_app.command("score")
def overlap_score(
    index: Annotated[Path, typer.Option(help="index folder")],
    data: Annotated[str, typer.Option(help="candidate data spec")],
    n: Annotated[list[int], typer.Option("--n", help="n to score (default: all)")] = [],  # noqa: B006
    out: Annotated[Path | None, typer.Option(help="per-sample JSONL; also .summary.json")] = None,
    plot: Annotated[Path | None, typer.Option(help="histogram PNG (default: beside --out)")] = None,
    text_field: TextField = None,
    label_field: LabelField = None,
) -> None:
    """overlap_n(x): the fraction of each candidate's n-grams found in the corpus."""
    from imprint.diagnostics.overlap import NgramIndex, overlap_scores
    from imprint.diagnostics.plots import plot_overlap_histograms

    try:
        opened = NgramIndex.open(index, n or None)
        loaded = _load(data, text_field, label_field)
        texts = [s.text for s in loaded.samples]
        results = {k: overlap_scores(opened, texts, k) for k in sorted(opened.filters)}
    except (ImprintError, ValueError) as err:
        _fail(err)
    import numpy as np

    labels = np.array([s.label for s in loaded.samples])
    summary: dict[str, Any] = {"index": str(index), "data": data, "n": {}}
    table = Table(title=f"n-gram overlap of {data} with {index}")
    for col in ("n", "mean (members)", "mean (non-members)", "undefined"):
        table.add_column(col)
    for k, res in results.items():
        means = {}
        for label, name in ((1, "members"), (0, "nonmembers")):
            vals = res.values[(labels == label) & ~np.isnan(res.values)]
            means[name] = float(vals.mean()) if vals.size else None
        summary["n"][str(k)] = {
            "mean": means,
            "undefined": res.n_undefined,
            "fp_rate": opened.manifest["filters"][str(k)]["fp_rate_estimated"],
        }
        table.add_row(
            str(k),
            *(f"{m:.4f}" if m is not None else "-" for m in means.values()),
            f"{res.n_undefined} (fewer than {k} words)",
        )
    console.print(table)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out, "w", encoding="utf-8") as fh:
            for i, s in enumerate(loaded.samples):
                row: dict[str, Any] = {"id": s.id, "label": s.label}
                for k, res in results.items():
                    v = float(res.values[i])
                    row[f"overlap_{k}"] = None if math.isnan(v) else v
                    row[f"ngrams_{k}"] = int(res.n_ngrams[i])
                fh.write(json.dumps(row) + "\n")
        _write_json(out.with_name(out.stem + ".summary.json"), summary)
        plot = plot or out.with_suffix(".png")
    if plot is not None:
        plot_overlap_histograms({k: r.values for k, r in results.items()}, labels, plot)
        console.print(f"wrote {plot}")


def data_filter(
    data: Annotated[str, typer.Option(help="candidate data spec")],
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
    from imprint.diagnostics.decontam import PRESETS, filter_by_overlap, write_filtered
    from imprint.diagnostics.overlap import NgramIndex
    from imprint.errors import ConfigError

    try:
        if preset is not None:
            if preset not in PRESETS:
                raise ConfigError(f"unknown preset {preset!r}; choose from {list(PRESETS)}")
            n = PRESETS[preset][0] if n is None else n
            max_overlap = PRESETS[preset][1] if max_overlap is None else max_overlap
        if n is None or max_overlap is None:
            raise ConfigError("give --n and --max-overlap, or a --preset such as ngram_13_0.8")
        loaded = _load(data, text_field, label_field)
        opened = NgramIndex.open(index, [n])
        kept, removed, summary = filter_by_overlap(
            loaded.samples,
            opened,
            n=n,
            max_overlap=max_overlap,
            undefined=undefined,  # type: ignore[arg-type]
        )
        manifest = write_filtered(out, kept, removed, summary, source=data, index=index)
    except (ImprintError, ValueError) as err:
        _fail(err)
    removed_text = ", ".join(f"{v} {k}" for k, v in summary["removed"].items()) or "none"
    console.print(
        f"kept {summary['members']} members and {summary['nonmembers_kept']} of "
        f"{summary['nonmembers_in']} non-members; removed: {removed_text}"
    )
    console.print(f"wrote {out} and {manifest}")


def _parse_ints(text: str) -> list[int]:
    try:
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError as err:
        raise typer.BadParameter(f"{text!r}: use comma-separated integers, e.g. 1,10,25") from err


def perturb(
    data: Annotated[str, typer.Option(help="candidate data spec")],
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
    seed: Annotated[int, typer.Option()] = 0,
    bootstrap: Annotated[int, typer.Option(help="bootstrap resamples of the run")] = 1000,
    text_field: TextField = None,
    label_field: LabelField = None,
) -> None:
    """Write perturbed members (word edits, neighbours, paraphrases) and, with --model, the
    FPR they get at thresholds set on natural non-members (MIMIR Table 4)."""
    from imprint.diagnostics.perturb import PARAPHRASE_PROMPT, hf_generator, perturbed_rows

    try:
        loaded = _load(data, text_field, label_field)
        generate = None
        if paraphrase_model:
            generate = hf_generator(
                paraphrase_model, max_new_tokens=max_new_tokens, device=device, dtype=dtype
            )
        rows, summary = perturbed_rows(
            loaded.samples,
            edits=_parse_ints(edits),
            neighbour_fraction=neighbour_fraction,
            paraphraser=generate,
            prompt=paraphrase_prompt or PARAPHRASE_PROMPT,
            seed=seed,
        )
        out.mkdir(parents=True, exist_ok=True)
        dataset = out / "perturbed.jsonl"
        with open(dataset, "w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        _write_json(out / "perturbed.manifest.json", {"source": data, **summary})
        console.print(
            f"wrote {dataset}: {len(rows)} rows; made {summary['made']}, "
            f"skipped {summary['skipped'] or 'none'}"
        )
        if model is None:
            console.print(
                f"next: imprint run --data {dataset} --model MODEL --out RUN; "
                "then imprint perturb-table RUN"
            )
            return
        from imprint.run import RunConfig, execute_run

        run_dir = out / "run"
        config = RunConfig(
            model=model,
            data=str(dataset),
            out=run_dir,
            seed=seed,
            n_bootstrap=bootstrap,
            attacks=tuple(a.strip() for a in attacks.split(",") if a.strip()),
            device=device,
            dtype=dtype,
            blind=False,
        )
        execute_run(config, console=console)
    except (ImprintError, ValueError) as err:
        _fail(err)
    perturb_table(run_dir, out=out)


def perturb_table(
    run: Annotated[Path, typer.Argument(help="run folder scored on a perturbed dataset")],
    out: Annotated[Path | None, typer.Option(help="folder for the table and plot")] = None,
) -> None:
    """FPR of perturbed members at thresholds fixed on natural non-members, per attack."""
    from imprint.diagnostics.plots import plot_group_histograms
    from imprint.diagnostics.runs import perturbation_table, read_run

    try:
        result = perturbation_table(run)
        scores = read_run(run)
    except (ImprintError, ValueError) as err:
        _fail(err)
    folder = out or run
    table = Table(title="rate called member at thresholds set on natural non-members")
    table.add_column("attack")
    table.add_column("target FPR")
    for group in result["groups"]:
        table.add_column(group)
    for attack, row in result["attacks"].items():
        for key in row["thresholds"]:
            cells = [row["rates"][g][key] for g in result["groups"]]
            table.add_row(attack, key, *("-" if c is None else f"{c:.3f}" for c in cells))
    console.print(table)
    _write_json(folder / "perturbation_table.json", result)
    groups = [
        ("members" if lab == 1 else "nonmembers")
        if str(m.get("perturbation") or "none") == "none"
        else str(m["perturbation"])
        for m, lab in zip(scores.meta, scores.labels, strict=True)
    ]
    plot = plot_group_histograms(
        scores.scores, groups, folder / "perturbation_histograms.png", order=result["groups"]
    )
    console.print(f"wrote {plot}")


def compare(
    run_a: Annotated[Path, typer.Argument(help="run folder A (thresholds are set here)")],
    run_b: Annotated[Path, typer.Argument(help="run folder B")],
    out: Annotated[Path | None, typer.Option(help="JSON file to write")] = None,
    fprs: Annotated[str, typer.Option(help="target FPRs on A")] = "0.01,0.05,0.1",
    bootstrap: Annotated[int, typer.Option(help="resamples for the AUC difference")] = 1000,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Thresholds fixed at x % FPR on A's non-members: the FPR on B's (MIMIR Table 5), and
    AUC(B) - AUC(A) with a bootstrap interval."""
    from imprint.diagnostics.runs import compare_runs

    try:
        targets = [float(f) for f in fprs.split(",") if f.strip()]
        result = compare_runs(run_a, run_b, fprs=targets, n_resamples=bootstrap, seed=seed)
    except (ImprintError, ValueError) as err:
        _fail(err)
    table = Table(title=f"thresholds from {run_a} applied to {run_b}")
    for col in ("attack", *(f"FPR on B @{f:g}" for f in targets), "AUC A", "AUC B", "B - A"):
        table.add_column(col)
    for attack, row in result["attacks"].items():
        if "error" in row:
            table.add_row(attack, *(["-"] * len(targets)), "-", "-", row["error"])
            continue
        cells = [row["transfer"][k]["fpr_b"] for k in row["transfer"]]
        a, b, d = (row["auc"][k] for k in ("a", "b", "diff"))
        table.add_row(
            attack,
            *("-" if c is None else f"{c:.3f}" for c in cells),
            f"{a['estimate']:.3f}",
            f"{b['estimate']:.3f}",
            f"{d['estimate']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]",
        )
    console.print(table)
    if out is not None:
        _write_json(out, result)


diagnostics_app = typer.Typer(no_args_is_help=True, help="Benchmark-validity diagnostics.")
diagnostics_app.command("blind")(blind)
diagnostics_app.add_typer(overlap_app, name="overlap")
_data_app = typer.Typer(no_args_is_help=True, help="Data transforms.")
_data_app.command("filter")(data_filter)
diagnostics_app.add_typer(_data_app, name="data")
diagnostics_app.command("perturb")(perturb)
diagnostics_app.command("perturb-table")(perturb_table)
diagnostics_app.command("compare")(compare)
