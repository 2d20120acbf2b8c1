"""``imprint duci``: what fraction of a document set a model trained on, with an interval
(DUCI, Tao et al. 2025; :mod:`imprint.documents.duci`). Dataset inference (``imprint run --unit
document``) asks whether a set was used; this asks how much of it.

Inputs: the target, reference models whose training data is known (``--references``: a game
folder or a training manifest, as ``imprint run`` takes), the documents (``--data``: ``.jsonl``
rows with ``text``, optional ``id`` and ``document``, or ``.txt`` one text a line) and
population texts no model trained on (the manifest's ``population`` or ``--population``).
Model calls go through the request store (``--cache``), so a rerun costs none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from imprint.cli.common import check_out_file, handle_errors, say, write_json
from imprint.data.text_checks import is_blank
from imprint.errors import DataError

__all__ = ["COVERAGE", "duci", "read_texts"]

#: the interval's coverage as measured (imprint.calibration.duci, 300 data sets a row)
COVERAGE = "0.96 to 1.00 in every setting (300 data sets each; docs/calibration.md)"


def read_texts(path: Path, option: str) -> tuple[list[str], list[str], list[str]]:
    """(texts, ids, document ids) of a ``.jsonl`` (``text``; optional ``id`` and ``document``,
    default: the line's ``{stem}:{n}`` and the id) or ``.txt`` file (one text a line)."""
    if not path.is_file():
        raise DataError(f"{option} {str(path)!r}: no such file; pass a .jsonl or .txt file")
    if path.suffix not in (".jsonl", ".txt"):
        raise DataError(
            f"{option} {str(path)!r}: unknown extension {path.suffix!r}; use .jsonl (a "
            "'text' field per row, optional 'id' and 'document') or .txt (one text a line)"
        )
    texts, ids, docs = [], [], []
    for n, line in enumerate(_utf8_lines(path, option), start=1):
        if not line.strip():
            continue
        row: Any = {"text": line}
        if path.suffix == ".jsonl":
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(
                    f"{option} {path}:{n}: not JSON ({err.msg}); one object a line"
                ) from None
        text = row.get("text") if isinstance(row, dict) else None
        if not isinstance(text, str) or is_blank(text):  # zero-width characters only: blank
            raise DataError(
                f"{option} {path}:{n}: no non-empty 'text' field; add it or drop the row"
            )
        for key in ("id", "document"):
            if key in row and not isinstance(row[key], str | int):
                raise DataError(
                    f"{option} {path}:{n}: '{key}' is {json.dumps(row[key])}; give a string "
                    "or a number, or leave the field out"
                )
        texts.append(text)
        ids.append(str(row.get("id", f"{path.stem}:{n}")))
        docs.append(str(row.get("document", ids[-1])))
    if not texts:
        raise DataError(f"{option} {str(path)!r}: no texts in the file; add one text a row")
    if len(set(ids)) != len(ids):
        raise DataError(f"{option} {path}: ids repeat; give every row its own 'id'")
    return texts, ids, docs


def _utf8_lines(path: Path, option: str) -> list[str]:
    """The file's lines, decoded as UTF-8 (a BOM dropped); bytes that are not UTF-8 are refused
    naming the line, as the data loaders do."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise DataError(
            f"{option} {path}:{line}: invalid UTF-8 (byte {data[err.start]:#04x}); re-encode "
            "the file as UTF-8"
        ) from None


def _document_membership(member: Any, ids: list[str], docs: list[str]) -> Any:
    """(K, n_documents) memberships from the sequences' (K, n_sequences); a document whose
    sequences a reference model saw differently is refused."""
    import numpy as np

    from imprint.training_manifest import UNKNOWN

    order = list(dict.fromkeys(docs))
    out = np.full((member.shape[0], len(order)), UNKNOWN, dtype=np.int8)
    for j, d in enumerate(order):
        cols = [i for i, x in enumerate(docs) if x == d]
        block = member[:, cols]
        if (block != block[:, :1]).any():
            raise DataError(
                f"--data: document {d!r} has sequences a reference model trained on and others "
                "it did not; membership is per document: list all its ids or none"
            )
        out[:, j] = block[:, 0]
    if (out == UNKNOWN).all(axis=0).any() or not ((out == 1).any() and (out == 0).any()):
        raise DataError(
            "--data: the reference models' manifest says nothing of some documents, or none of "
            "them is a member (or a non-member) of any reference model; the document ids must be "
            "the manifest's sample ids (see --references)"
        )
    return out


@handle_errors
def duci(
    model: Annotated[str, typer.Option(help="the target model spec")],
    references: Annotated[
        str,
        typer.Option(
            help="reference models with known training data: a game folder or a "
            "training manifest (.json/.yaml); >= 3 models, or 2 pairs"
        ),
    ],  # fmt: skip
    data: Annotated[Path, typer.Option(help="the documents: .jsonl (text, id, document) or .txt")],
    population: Annotated[
        Path | None, typer.Option(help="texts no model trained on (default: the manifest's)")
    ] = None,
    n_bootstrap: Annotated[
        int, typer.Option(help="bootstrap resamples (documents and reference models)")
    ] = 1000,
    confidence: Annotated[float, typer.Option(help="the interval's confidence")] = 0.95,
    seed: Annotated[int, typer.Option(help="seed of the bootstrap")] = 0,
    cache: Annotated[Path | None, typer.Option(help="request store (default: the run's)")] = None,
    out: Annotated[Path | None, typer.Option(help="write the result as JSON")] = None,
    overwrite: Annotated[bool, typer.Option("--overwrite", help="replace --out")] = False,
) -> None:
    """Estimate what fraction of a document set the target trained on (DUCI), with an interval."""
    from imprint.documents.duci import duci_from_models
    from imprint.training_manifest import load_reference_set

    check_out_file(out, overwrite=overwrite)
    if n_bootstrap < 10:
        raise DataError(f"--n-bootstrap {n_bootstrap}: give >= 10 resamples (1000 is the default)")
    if not 0 < confidence < 1:
        raise DataError(f"--confidence {confidence}: give a level between 0 and 1, e.g. 0.95")
    refset = load_reference_set(references)
    texts, ids, docs = read_texts(data, "--data")
    member = _document_membership(refset.matrix(ids), ids, docs)
    pop = read_texts(population, "--population")[0] if population else list(refset.population)
    if set(pop) & set(texts):
        raise DataError("--population shares texts with --data; population texts must be unseen")
    requests, close = _requests(model, refset, cache)
    try:
        result = duci_from_models(
            requests, refset.names, member, texts, docs, pop,
            n_bootstrap=n_bootstrap, confidence=confidence, seed=seed,
        )  # fmt: skip
    finally:
        close()
    for line in describe(result, len(refset.names), len(pop)):
        say(line)
    if out is not None:
        from imprint.documents.duci import DEVIATIONS

        write_json(
            out,
            {"model": model, "references": references, **result.to_dict(),
             "deviations": list(DEVIATIONS)},
        )  # fmt: skip


def describe(result: Any, k: int, n_population: int) -> list[str]:
    """The result in words: the estimate, its interval and what the interval resamples."""
    lo, hi = result.interval
    level = f"{result.confidence * 100:g} %"
    return [
        f"DUCI: an estimated {result.estimate:.1%} of the {result.n_documents} documents were "
        f"trained on; {level} interval [{lo:.1%}, {hi:.1%}]",
        f"interval: two-way percentile bootstrap ({result.n_bootstrap} resamples): each "
        "resample redraws the documents and the reference models with replacement and "
        "recomputes the threshold, its TPR and FPR and the estimate; each side then widened by "
        "how far one more training run's TPR and FPR could move the estimate (a Student-t "
        f"prediction limit from the {k} reference models' rates; one model's sd at the estimate "
        f"{result.model_spread:.3f}), since the target is one more training run; the population "
        f"is not resampled. Coverage measured by simulation at {level} (benchmarks/"
        f"bench_calibration.py --only duci: 60 documents, K = 4 or 8, fractions 0 to 1): "
        f"{COVERAGE}",
        *_unreliable(result),
        f"MIA: RMIA offline (a = {result.extra.get('a', float('nan')):.2f}) against "
        f"{n_population} population texts, {k} reference models; threshold "
        f"{result.threshold:.3f}, TPR {result.tpr:.3f}, FPR {result.fpr:.3f}; share guessed "
        f"member before debiasing {result.naive:.1%} (the estimate is not clipped to [0, 1]; its "
        "interval is cut there, where the truth lies)",
        "differs from Privacy Meter's DUCI and the authors' text code (1/perplexity score, "
        "'robust' threshold, clipping to [0, 1]): see 'deviations' in --out and "
        "docs/guide/documents.md",
    ]


def _unreliable(result: Any) -> list[str]:
    """A warning line when the interval cannot be trusted, else none."""
    if result.reliable:
        return []
    side = getattr(result, "out_of_range", None)
    if side is not None:
        lo, hi = result.uncut_interval
        edge = "100 %" if side == "above" else "0 %"
        return [
            f"warning: the interval [{lo:.1%}, {hi:.1%}] lies wholly {side} {edge} (cut to "
            f"{edge}, it is one point that reads as certainty): the target separates its "
            f"documents {'more' if side == 'above' else 'less'} than its reference models do, "
            "so the reference models do not calibrate it and no fraction is estimated; use "
            "reference models trained like the target (same recipe, epochs and data size)"
        ]
    return [
        f"warning: the interval is unreliable: {result.degenerate_share:.1%} of the resamples "
        "had TPR <= FPR (no estimate; left out of the percentiles) or the references' spread "
        "could not be measured; use more reference models, or a target and references "
        "trained harder"
    ]


def _requests(model: str, refset: Any, cache: Path | None) -> tuple[Any, Any]:
    """A request client over the target and the reference models, on the run's store."""
    from imprint.backends.models import default_cache_path
    from imprint.requests.client import ModelRequests, load_local_model
    from imprint.requests.kinds import local_transformers
    from imprint.requests.runner import RequestRunner
    from imprint.requests.store import RequestStore

    store = RequestStore(cache or default_cache_path())
    backends = {"target": load_local_model("target", model)}
    for m in refset.models:
        backends[m.name] = load_local_model(m.name, m.spec)
    requests = ModelRequests(backends, RequestRunner(store), local_models=local_transformers)
    return requests, store.close
