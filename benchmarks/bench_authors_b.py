"""Agreement of imprint's InfoRMIA, RaMIA and DUCI with the reference code they follow, on the
same inputs: max |difference| and Spearman correlation over >= 40 texts (or documents).

The reference code is not imported (none of it is installable here): each ``reference_*``
function below is a TRANSCRIPTION, written for this comparison only and never used by the
package, of the named function's logic:

- ``reference_token_informia``: ``TokenLevelInfoRMIA.predict_tokens`` of Soreseth/Masterthesis
  (``src/attacks/reference_scores.py``; the public implementation of token-level InfoRMIA: the
  authors' code was not found), at temperature 1 and without its final sign flip (imprint's
  settings), on a tiny random target and two tiny random references sharing a tokenizer,
  over 48 WikiMIA texts (their first 12 words, the first 48 that fit 128 tokens).
- ``reference_ramia``: Privacy Meter's offline RMIA (``modules/mia/attacks/rmia.py``
  ``run_rmia`` with ``get_out_ref_signals``) on every range sample, and ``trim_mia_scores``
  (``modules/ramia/ramia_scores.py``) to combine them, on simulated signals of 60 ranges of 10
  samples with 4 reference models in pairs. Compared at a fixed trim both agree on (the mean of
  the k highest), then the tuned trim, where Privacy Meter's mismatch (it tunes the mean of the
  k lowest, then applies the S - k lowest) makes them differ whenever the lowest side wins.
- ``reference_duci``: Privacy Meter's ``DUCI.debias_pred`` (``modules/duci/module_duci.py``):
  sklearn's roc_curve on the pooled reference scores, the argmax of TPR - FPR, guesses
  ``score > threshold``, on simulated MIA scores of 60 documents and 4 reference models.

On a real game (``--game DIR``: a game folder built from SmolLM2-135M with reference models,
e.g. the demo's): InfoRMIA on the target and two of its reference models over ``--n`` WikiMIA
texts (both sides on the same token ids), and RaMIA's RMIA + trimmed mean on the real mean
log-likelihoods of imprint's ranges (10 samples) of the game's first 40 texts under the target and
4 reference models, memberships from the game's manifest.

Run: python benchmarks/bench_authors_b.py [--game DIR --n 48]   (about a minute without --game
on a busy 2-core machine)
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def agreement(ours: np.ndarray, theirs: np.ndarray) -> dict[str, float]:
    from scipy.stats import spearmanr

    ours, theirs = np.asarray(ours, float).ravel(), np.asarray(theirs, float).ravel()
    rho = spearmanr(ours, theirs).statistic if np.ptp(ours) and np.ptp(theirs) else float("nan")
    return {"n": int(ours.size), "max_abs_diff": float(np.max(np.abs(ours - theirs))),
            "spearman": float(rho)}  # fmt: skip


# -- InfoRMIA -------------------------------------------------------------------------------------
def reference_token_informia(
    target: Any, refs: list[Any], tokenizer: Any, text: str, ids: list[int] | None = None
) -> list:
    """TRANSCRIPTION (comparison only) of TokenLevelInfoRMIA.predict_tokens, temperature 1:
    softmax of each model's logits on the text (its own special tokens; ``ids``: these token
    ids instead, so both sides score the same tokens), the reference probabilities averaged,
    clamped at 1e-10; per token log p_t(x) - log p_r(x) + sum_v p_r (log p_r - log p_t), in
    nats."""
    import torch

    if ids is None:
        enc = tokenizer(text, return_tensors="pt")
    else:
        tensor = torch.tensor([ids])
        enc = {"input_ids": tensor, "attention_mask": torch.ones_like(tensor)}
    with torch.no_grad():
        lt = target(**enc).logits[0, :-1].double()
        lr = [r(**enc).logits[0, :-1].double() for r in refs]
    labels = enc["input_ids"][0, 1:]
    p_t = torch.softmax(lt, -1)
    p_r = torch.stack([torch.softmax(x, -1) for x in lr]).mean(0)
    p_t, p_r = p_t / p_t.sum(-1, keepdim=True), p_r / p_r.sum(-1, keepdim=True)
    p_t, p_r = p_t.clamp(min=1e-10), p_r.clamp(min=1e-10)
    idx = labels.unsqueeze(-1)
    ratio = (torch.log(p_t.gather(-1, idx)) - torch.log(p_r.gather(-1, idx))).squeeze(-1)
    kl = (p_r * (torch.log(p_r) - torch.log(p_t))).sum(-1)
    return (ratio + kl).tolist()


def informia_agreement(texts: list[str]) -> dict[str, Any]:
    import tempfile

    sys.path.insert(0, str(REPO / "tests"))
    from conftest import make_tiny_model  # the test suite's tiny random Llama

    from imprint.attacks.informia import InfoRMIA
    from imprint.backends.hf import HFLogprobBackend
    from imprint.requests.client import in_memory_requests

    tmp = Path(tempfile.mkdtemp())
    paths = [make_tiny_model(tmp / f"m{i}", seed=i) for i in range(3)]
    target = HFLogprobBackend(str(paths[0]), start_token="bos")
    refs = {f"r{i}": HFLogprobBackend(str(p), start_token="bos") for i, p in enumerate(paths[1:])}
    requests = in_memory_requests(target, roles=refs)
    # the first 48 that fit the tiny models' 128-token context (a 320-token BPE is long-winded)
    texts = [t for t, n in zip(texts, target.count_tokens(texts), strict=True) if n <= 128][:48]
    ours = InfoRMIA(models=tuple(refs)).token_scores(requests, texts)
    tok_ours, tok_ref, seq_ours, seq_ref = [], [], [], []
    for text, t in zip(texts, ours, strict=True):
        theirs = np.array(
            reference_token_informia(
                target.model, [r.model for r in refs.values()], target.tokenizer,
                target.tokenizer.bos_token + text,
            )
        ) / math.log(2)  # fmt: skip
        tok_ours.append(np.asarray(t["scores"]))
        tok_ref.append(theirs)
        seq_ours.append(tok_ours[-1].mean())
        seq_ref.append(theirs.mean())
    lengths = {len(a) == len(b) for a, b in zip(tok_ours, tok_ref, strict=True)}
    assert lengths == {True}, "token counts differ"
    return {
        "texts": agreement(np.array(seq_ours), np.array(seq_ref)),
        "tokens": agreement(np.concatenate(tok_ours), np.concatenate(tok_ref)),
    }


# -- RaMIA ----------------------------------------------------------------------------------------
def reference_rmia_offline(target, refs, member, z_target, z_refs, a, n_refs):
    """TRANSCRIPTION (comparison only) of Privacy Meter's run_rmia with K > 1 reference models:
    probabilities (n,), (n, K); the ``n_refs`` largest of signal x OUT per sample, averaged,
    Pr(x) = (1 + a)/2 mean + (1 - a)/2; the fraction of z with ratio_x / ratio_z > 1."""
    out = np.where(member, 0.0, refs)
    out = -np.sort(-out, axis=1)[:, :n_refs]
    px = (1 + a) / 2 * out.mean(1) + (1 - a) / 2
    z_out = -np.sort(-z_refs, axis=1)[:, :n_refs]
    pz = (1 + a) / 2 * z_out.mean(1) + (1 - a) / 2
    ratios = (target / px)[:, None] / (z_target / pz)[None, :]
    return (ratios > 1.0).mean(1)


def reference_trim(
    scores: np.ndarray, ratio: float, direction: str, *, rounded: bool = False
) -> np.ndarray:
    """TRANSCRIPTION (comparison only) of trim_mia_scores: keep int((1 - ratio) * S) (with
    ``rounded``, round() instead: int(0.1 * 10 - ...) is 0 in floating point when ratio = 0.9,
    an empty mean, NaN)."""
    keep = (round if rounded else int)((1 - ratio) * scores.shape[1])
    if direction == "none":
        return scores.mean(1)
    ordered = np.sort(scores, 1) if direction == "top" else -np.sort(-scores, 1)
    return ordered[:, :keep].mean(1)


def reference_tune_trim(scores: np.ndarray, labels: np.ndarray) -> tuple[float, str]:
    """TRANSCRIPTION (comparison only) of audit_models_range's trim search."""
    from sklearn.metrics import roc_auc_score

    size, best, out = scores.shape[1], 0.0, (0.0, "none")
    for k in range(1, size + 1):
        low = np.sort(scores, 1)[:, :k].mean(1)
        if (v := roc_auc_score(labels, low)) > best:
            best, out = v, (k / size, "top")
        high = -np.sort(-scores, 1)[:, :k].mean(1)
        if (v := roc_auc_score(labels, high)) > best:
            best, out = v, (1 - k / size, "bottom")
    return out


def ramia_agreement(n: int = 60, size: int = 10, k: int = 4, seed: int = 0) -> dict[str, Any]:
    from imprint.attacks.ramia import trimmed_score, tune_trim
    from imprint.attacks.rmia import rmia_scores

    rng = np.random.default_rng(seed)
    member = np.zeros((k, n), dtype=int)
    for j in range(0, k, 2):
        member[j, rng.permutation(n)[: n // 2]] = 1
        member[j + 1] = 1 - member[j]
    truth = rng.random(n) < 0.5
    base = rng.normal(-3, 0.5, size=(n, 1)) + rng.normal(0, 0.2, size=(n, size))
    # a member's range: the centre and a few samples carry the training shift
    carries = np.zeros((n, size), bool)
    carries[:, 0] = True
    carries[:, 1:3] = rng.random((n, 2)) < 0.5

    def signal(in_model: np.ndarray) -> np.ndarray:
        return base + 0.4 * (in_model[:, None] & carries) + rng.normal(0, 0.05, (n, size))

    tgt = signal(truth)
    refs = np.stack([signal(member[j].astype(bool)) for j in range(k)])  # (K, n, S)
    z_t, z_r = rng.normal(-3, 0.5, 40), None
    z_r = z_t[None, :] + rng.normal(0, 0.05, (k, 40))
    flat_m = np.repeat(member, size, axis=1)
    a = 0.3
    ours = rmia_scores(
        tgt.ravel(), refs.reshape(k, -1), flat_m, z_t, z_r, np.zeros_like(z_r), offline=True, a=a
    ).reshape(n, size)
    theirs = reference_rmia_offline(
        np.exp(tgt.ravel()), np.exp(refs.reshape(k, -1).T), flat_m.T.astype(bool),
        np.exp(z_t), np.exp(z_r.T), a, k // 2,
    ).reshape(n, size)  # fmt: skip
    # Privacy Meter keeps the n_refs (= K/2) LARGEST reference signals of a population text,
    # all of whose K models are OUT; imprint averages all K. The same rule on imprint's side:
    top2 = -np.sort(-z_r, axis=0)[:2]
    same_z = rmia_scores(
        tgt.ravel(), refs.reshape(k, -1), flat_m, z_t, top2, np.zeros_like(top2), offline=True,
        a=a,
    ).reshape(n, size)  # fmt: skip
    fixed = agreement(trimmed_score(ours, "highest", 3), reference_trim(theirs, 0.7, "bottom"))
    # tuning on reference model 0 attacked by models 2, 3 (its partner 1 left out)
    rest = [2, 3]
    pseudo = rmia_scores(
        refs[0].ravel(), refs[rest].reshape(2, -1), flat_m[rest], z_r[0], z_r[rest],
        np.zeros_like(z_r[rest]), offline=True, a=a,
    ).reshape(n, size)  # fmt: skip
    side, kk, _ = tune_trim(pseudo, member[0])
    ratio, direction = reference_tune_trim(pseudo, member[0])
    tuned = agreement(trimmed_score(ours, side, kk), reference_trim(theirs, ratio, direction))
    same_rule = {
        "fixed_trim_highest3": agreement(
            trimmed_score(same_z, "highest", 3), reference_trim(theirs, 0.7, "bottom")
        ),
        "tuned_keep_rounded": agreement(
            trimmed_score(same_z, side, kk),
            reference_trim(theirs, ratio, direction, rounded=True),
        ),
    }
    return {
        "same_population_rule": same_rule,
        "rmia_per_sample": agreement(ours, theirs),
        "rmia_per_sample_same_population_rule": agreement(same_z, theirs),
        "fixed_trim_highest3": fixed,
        "tuned": {"imprint": [side, kk], "privacy_meter": [ratio, direction], **tuned},
    }


# -- DUCI -----------------------------------------------------------------------------------------
def reference_duci(target: np.ndarray, ref_scores: np.ndarray, ref_member: np.ndarray):
    """TRANSCRIPTION (comparison only) of DUCI.debias_pred: returns per-document p_i."""
    from sklearn.metrics import roc_curve

    fpr, tpr, thr = roc_curve(ref_member.ravel(), ref_scores.ravel())
    best = int(np.argmax(tpr - fpr))
    preds = target > thr[best]
    return (preds - fpr[best]) / (tpr[best] - fpr[best])


def reference_mimir_informia(target: Any, refs: list[Any], ids: list[int]) -> np.ndarray:
    """TRANSCRIPTION (comparison only) of the authors' InfoRMIAToken (taojiashu/mimir,
    mimir/attacks/info_rmia.py) without MIMIR's final negation: per token, log p_t(x) minus the
    references' MEAN LOG-probability of x, minus sum_v g(v) (log p_t(v) - log g(v)) with
    log g = the references' mean log-probability (exp of it, not renormalised), in nats."""
    import torch

    tensor = torch.tensor([ids])
    with torch.no_grad():
        log_t = torch.log_softmax(target(input_ids=tensor).logits[0, :-1].double(), -1)
        log_r = torch.stack(
            [torch.log_softmax(r(input_ids=tensor).logits[0, :-1].double(), -1) for r in refs]
        ).mean(0)
    idx = tensor[0, 1:].unsqueeze(-1)
    term = (log_r.exp() * (log_t - log_r)).sum(-1)
    return ((log_t.gather(-1, idx) - log_r.gather(-1, idx)).squeeze(-1) - term).numpy()


def informia_authors_agreement(texts: list[str], ks: tuple[int, ...] = (1, 4)) -> dict[str, Any]:
    """imprint's InfoRMIA against the authors' rule (:func:`reference_mimir_informia`, in bits)
    on tiny random models sharing a tokenizer: the same with one reference model; with K > 1
    imprint mixes the references' probabilities, the authors average their log-probabilities."""
    import tempfile

    sys.path.insert(0, str(REPO / "tests"))
    from conftest import make_tiny_model

    from imprint.attacks.informia import InfoRMIA
    from imprint.backends.hf import HFLogprobBackend
    from imprint.requests.client import in_memory_requests

    tmp = Path(tempfile.mkdtemp())
    paths = [make_tiny_model(tmp / f"m{i}", seed=10 + i) for i in range(1 + max(ks))]
    target = HFLogprobBackend(str(paths[0]), start_token="bos")
    texts = [t for t, n in zip(texts, target.count_tokens(texts), strict=True) if n <= 128][:48]
    out = {}
    for k in ks:
        refs = {f"r{i}": HFLogprobBackend(str(p), start_token="bos") for i, p in
                enumerate(paths[1 : 1 + k])}  # fmt: skip
        ours = InfoRMIA(models=tuple(refs)).token_scores(
            in_memory_requests(target, roles=refs), texts
        )
        models = [r.model for r in refs.values()]
        tok_ours, tok_ref = [], []
        for text, t in zip(texts, ours, strict=True):
            ids = [*target.start_ids, *target.encode(text)]
            tok_ours.append(np.asarray(t["scores"]))
            tok_ref.append(reference_mimir_informia(target.model, models, ids) / math.log(2))
        assert all(len(a) == len(b) for a, b in zip(tok_ours, tok_ref, strict=True))
        out[f"K={k}"] = {
            "texts": agreement(
                np.array([a.mean() for a in tok_ours]), np.array([b.mean() for b in tok_ref])
            ),
            "tokens": agreement(np.concatenate(tok_ours), np.concatenate(tok_ref)),
        }
    return out


def duci_agreement(n: int = 60, k: int = 4, seed: int = 0) -> dict[str, Any]:
    from imprint.documents.duci import debias

    rng = np.random.default_rng(seed)
    out = {}
    for name, rounding in (("continuous", None), ("tied (scores rounded to 0.1)", 1)):
        base = rng.normal(size=n)
        member = (rng.random((k, n)) < 0.5).astype(int)
        target_in = rng.random(n) < 0.4
        target = base + 1.5 * target_in + rng.normal(size=n)
        refs = base + 1.5 * member + rng.normal(size=(k, n))
        if rounding is not None:
            target, refs = np.round(target, rounding), np.round(refs, rounding)
        ours, *_ = debias(target, refs, member)
        theirs = reference_duci(target, refs, member)
        out[name] = {
            **agreement(ours, theirs),
            "estimate_imprint": float(ours.mean()),
            "estimate_privacy_meter": float(theirs.mean()),
            "truth": float(target_in.mean()),
        }
    return out


# -- on a real game (SmolLM2-135M fine-tuned: a target and its reference models) ----------------
def _game_models(game: Path, k: int) -> tuple[Any, dict[str, Any], Any]:
    from imprint.backends.hf import HFLogprobBackend
    from imprint.training_manifest import load_reference_set

    refset = load_reference_set(str(game))
    target = HFLogprobBackend(str(game / "model"), dtype="float32")
    refs = {
        m.name: HFLogprobBackend(m.spec, name=m.name, dtype="float32") for m in refset.models[:k]
    }
    return target, refs, refset


def informia_agreement_real(game: Path, texts: list[str]) -> dict[str, Any]:
    """InfoRMIA on the game's target and its first two reference models (real SmolLM2-135M
    fine-tunes), both sides on the same token ids (the target's start token, then the text)."""
    from imprint.attacks.informia import InfoRMIA
    from imprint.requests.client import in_memory_requests

    target, refs, _ = _game_models(game, 2)
    requests = in_memory_requests(target, roles=refs)
    ours = InfoRMIA(models=tuple(refs)).token_scores(requests, texts)
    tok_ours, tok_ref = [], []
    for text, t in zip(texts, ours, strict=True):
        ids = [*target.start_ids, *target.encode(text)]
        models = [r.model for r in refs.values()]
        theirs = reference_token_informia(target.model, models, target.tokenizer, text, ids)
        tok_ours.append(np.asarray(t["scores"]))
        tok_ref.append(np.array(theirs) / math.log(2))
    assert all(len(a) == len(b) for a, b in zip(tok_ours, tok_ref, strict=True))
    return {
        "texts": agreement(
            np.array([a.mean() for a in tok_ours]), np.array([b.mean() for b in tok_ref])
        ),
        "tokens": agreement(np.concatenate(tok_ours), np.concatenate(tok_ref)),
    }


def ramia_agreement_real(game: Path, n: int = 40, size: int = 10, k: int = 4) -> dict[str, Any]:
    """RaMIA's RMIA and trimmed mean against the transcriptions on REAL signals: the mean token
    log-likelihood of every range sample (imprint's word-replaced ranges of the game's texts)
    under the game's target and K reference models, their memberships from its manifest, the
    manifest's population as z. a = 0.3 for both (offline)."""
    import json

    from imprint.attacks.ramia import range_samples, trimmed_score
    from imprint.attacks.rmia import rmia_scores
    from imprint.requests.client import in_memory_requests

    target, refs, refset = _game_models(game, k)
    rows = [json.loads(line) for line in (game / "data.jsonl").open()][:n]
    ids, centres = [r["id"] for r in rows], [r["text"] for r in rows]
    ranges = [range_samples(t, size, 5) for t in centres]
    flat = [x for r in ranges for x in r]
    requests = in_memory_requests(target, roles=refs)

    def loglik(role: str, texts: list[str]) -> np.ndarray:
        return np.array([float(np.mean(s.logp)) for s in requests.token_stats(role, texts)])

    tgt = loglik("target", flat)
    ref_sig = np.stack([loglik(name, flat) for name in refs])  # (K, n * S)
    pop = list(refset.population)
    z_t, z_r = loglik("target", pop), np.stack([loglik(name, pop) for name in refs])
    member = refset.matrix(ids)[:k]
    flat_m = np.repeat(member, size, axis=1)
    a = 0.3
    ours = rmia_scores(
        tgt, ref_sig, flat_m, z_t, z_r, np.zeros_like(z_r), offline=True, a=a
    ).reshape(n, size)
    theirs = reference_rmia_offline(
        np.exp(tgt), np.exp(ref_sig.T), flat_m.T.astype(bool), np.exp(z_t), np.exp(z_r.T), a,
        k // 2,
    ).reshape(n, size)  # fmt: skip
    top = -np.sort(-z_r, axis=0)[: k // 2]  # Privacy Meter's population rule on imprint's side
    same_z = rmia_scores(
        tgt, ref_sig, flat_m, z_t, top, np.zeros_like(top), offline=True, a=a
    ).reshape(n, size)
    distinct = float(np.mean([len(set(r)) for r in ranges]))
    return {
        "ranges": n, "samples_per_range": size, "distinct_samples_per_range": distinct,
        "rmia_per_sample": agreement(ours, theirs),
        "rmia_per_sample_same_population_rule": agreement(same_z, theirs),
        "fixed_trim_highest3": agreement(
            trimmed_score(ours, "highest", 3), reference_trim(theirs, 0.7, "bottom")
        ),
        "fixed_trim_highest3_same_population_rule": agreement(
            trimmed_score(same_z, "highest", 3), reference_trim(theirs, 0.7, "bottom")
        ),
    }  # fmt: skip


def main() -> None:
    import argparse
    import json

    from common import load_rows  # benchmarks/common.py, beside this file

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--game", type=Path, default=None,
        help="also on a real game folder (SmolLM2-135M target + reference models + manifest)",
    )  # fmt: skip
    parser.add_argument("--n", type=int, default=48, help="texts on the real game")
    parser.add_argument(
        "--only-game", choices=("informia", "ramia"), default=None,
        help="only this part on the real game (printed as soon as it is done)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.only_game is not None and args.game is not None:
        if args.only_game == "informia":
            wikimia = [r["input"] for r in load_rows(32)[: args.n]]
            part = informia_agreement_real(args.game, wikimia)
        else:
            part = ramia_agreement_real(args.game, n=max(40, min(args.n, 148)))
        print(json.dumps({"game": str(args.game), args.only_game: part}, indent=1), flush=True)
        return
    # the first 12 words: the tiny models' byte-level BPE of 320 tokens and context of 128
    texts = [" ".join(r["input"].split()[:12]) for r in load_rows(32)[:200]]
    report: dict[str, Any] = {
        "informia": informia_agreement(texts),
        "informia_authors": informia_authors_agreement(texts),
        "ramia": ramia_agreement(),
        "duci": duci_agreement(),
    }
    if args.game is not None:
        wikimia = [r["input"] for r in load_rows(32)[: args.n]]
        report["real_game"] = {
            "game": str(args.game),
            "informia_wikimia": informia_agreement_real(args.game, wikimia),
            "ramia": ramia_agreement_real(args.game, n=max(40, min(args.n, 148))),
        }
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    sys.path.insert(0, str(REPO / "benchmarks"))
    main()
