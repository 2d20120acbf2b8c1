"""Agreement of imprint's CAMIA, QMIA and probe attacks with the authors' code on a REAL model.

SmolLM2-135M (``smollm2-135m``, float32, CPU) on WikiMIA-32: 40 evaluated texts (the first 20
members and 20 non-members), the next 10 non-members as the attacks' held-out non-members
(CAMIA's reference, QMIA's training texts, the probe's proxy texts), 60 more non-members for
CAMIA's size check and 100 more as a second, larger QMIA training set. Per attack: max
|difference| and Spearman of imprint's scores against a TRANSCRIPTION of the reference code on
the same inputs. The transcriptions live in ``tests/attack_fixtures.py`` (labelled there;
never imported by the package):

- camia: LeakPro's CAMIA branch (``SignalExtractor`` features and ``Combiner``) on the model's
  per-token losses of each text and of it repeated 2x and 3x; imprint with LeakPro's settings
  (``repeats=leakpro``, ``p_rule=leakpro``, every feature on the lower tail) and with its
  defaults (copy repeats, conformal p-values, slope/ApEn on the upper tail).
- qmia: LeakPro's ``qmia.py`` training loop on the same (principal-component) MiniLM features
  and LL targets, fitted on 10 and on 100 non-members.
- probe: the authors' ``get_acts`` (forward hooks, last position), ``collect_acts``
  (standardise) and ``LRProbe.from_data`` on the activations of the same proxy (the target
  fine-tuned by imprint) at the layer imprint chose, from the same initial weights; once on
  imprint's ids (start token first) and once on the authors' own tokenisation.

CAMIA's size check on real texts: 2,000 draws of 20 of the 70 non-members (19 as the reference,
1 tested); the rejection rate of its calibrated combined p-value at alpha 0.05 and 0.1 per
``combine=`` method, and of the per-feature p-values under both rules.

Run: nice -n 15 python benchmarks/bench_authors_a.py [--out bench-authors-a.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))  # the transcriptions (tests/attack_fixtures.py)


def agreement(ours: Any, theirs: Any) -> dict[str, float]:
    from scipy.stats import spearmanr

    a, b = np.asarray(ours, float).ravel(), np.asarray(theirs, float).ravel()
    return {
        "n": int(a.size),
        "max_abs_diff": float(np.max(np.abs(a - b))),
        "spearman": float(spearmanr(a, b).statistic),
    }


def split(rows: list[dict[str, Any]]) -> tuple[list[str], list[str], list[str]]:
    members = [r["input"] for r in rows if r["label"] == 1]
    nonmembers = [r["input"] for r in rows if r["label"] == 0]
    return members[:20] + nonmembers[:20], nonmembers[20:30], nonmembers[30:90] + nonmembers[90:190]


# -- CAMIA ---------------------------------------------------------------------------------------


def camia_rows(client: Any, texts: list[str], repeats: str) -> tuple[list[dict], list[dict]]:
    """(imprint's features, the transcription's features) of each text."""
    from attack_fixtures import LeakProCAMIATranscription

    from imprint.attacks.camia import REPEAT, camia_features

    base = client.token_stats("target", texts)
    reps = client.token_stats("target", [t for x in texts for t in REPEAT.apply(x)])
    leak = LeakProCAMIATranscription()
    mine, theirs = [], []
    for i, b in enumerate(base):
        loss, r1, r2 = (-np.asarray(s.logp, np.float64) for s in (b, reps[2 * i], reps[2 * i + 1]))
        mine.append(camia_features(loss, b.token_ids, r1, r2, repeats=repeats))
        theirs.append(leak.features(loss.tolist(), b.token_ids.tolist(), r1.tolist(), r2.tolist()))
    return mine, theirs


def bench_camia(client: Any, evaluated: list[str], ref: list[str], bank: list[str]) -> dict:
    from attack_fixtures import LeakProCAMIATranscription

    from imprint.attacks.camia import camia_scores

    mine, theirs = camia_rows(client, evaluated + ref, "leakpro")
    default_rows, _ = camia_rows(client, evaluated + ref, "copy")
    n = len(evaluated)
    gap = max(abs(m[k] - t[k]) for m, t in zip(mine, theirs, strict=True) for k in m)
    leak = LeakProCAMIATranscription()
    # LeakPro's settings: its repeat sequences, its p-value rule, every feature's lower tail
    ref64 = leak.score(theirs[:n], theirs[n:], {}, dtype=np.float64)
    ref32 = leak.score(theirs[:n], theirs[n:], {}, dtype=np.float32)
    same = camia_scores(mine[:n], mine[n:], rule="leakpro", higher=frozenset())
    default = camia_scores(default_rows[:n], default_rows[n:])
    bank_rows, _ = camia_rows(client, bank, "copy")
    return {
        "feature_max_abs_diff (repeats=leakpro)": gap,
        "LeakPro settings vs LeakPro (float64 reference)": agreement(same, ref64),
        "LeakPro settings vs LeakPro (its float32 reference)": agreement(same, ref32),
        "imprint defaults vs LeakPro (float64 reference)": agreement(default, ref64),
        "size": camia_size(default_rows[n:] + bank_rows),
    }


def camia_size(rows: list[dict], trials: int = 2000, n_ref: int = 19) -> dict[str, Any]:
    """Rejection rates under the null (all ``rows`` non-members) at alpha 0.05 / 0.1."""
    from scipy.stats import binomtest

    from imprint.attacks.camia import HIGHER, METHODS, combined_p_values, feature_matrix, p_values

    names, values = feature_matrix(rows)
    tails = [k in HIGHER for k in names]
    rng = np.random.default_rng(0)
    draws = [rng.choice(len(values), n_ref + 1, replace=False) for _ in range(trials)]
    out: dict[str, Any] = {"texts": len(rows), "trials": trials, "n_reference": n_ref}
    for method in METHODS:
        p = np.array(
            [combined_p_values(values[d[:1]], values[d[1:]], tails, method)[0] for d in draws]
        )
        out[f"combined ({method})"] = {
            f"alpha {a}": rate(int(np.sum(p <= a + 1e-12)), trials, binomtest) for a in (0.05, 0.1)
        }
    lower = [k for k, t in enumerate(tails) if not t]
    for rule in ("conformal", "leakpro"):
        p = np.concatenate(
            [p_values(values[d[:1]], values[d[1:]], tails, rule=rule)[0, lower] for d in draws]
        )
        out[f"per-feature, lower tail, rule {rule} (mean over features)"] = {
            f"alpha {a}": float(np.mean(p <= a + 1e-12)) for a in (0.05, 0.1)
        }
    return out


def rate(k: int, n: int, binomtest: Any) -> dict[str, float]:
    ci = binomtest(k, n).proportion_ci(0.95)
    return {"rate": k / n, "low": float(ci.low), "high": float(ci.high)}


# -- QMIA -----------------------------------------------------------------------------------------


def bench_qmia(client: Any, evaluated: list[str], trains: dict[str, list[str]]) -> dict:
    """On the same (projected) features: imprint's head is fitted on the first k principal
    components of the training embeddings (a stated deviation), so LeakPro's loop is fed those."""
    from attack_fixtures import leakpro_qmia_scores_transcription

    from imprint.attacks.qmia import QMIA, principal_components
    from imprint.requests.embed import MiniLMEmbedder

    out: dict[str, Any] = {}
    for label, train in trains.items():
        stats = client.token_stats("target", train + evaluated)
        ll = np.array([float(np.mean(s.logp)) for s in stats])
        feats = MiniLMEmbedder().embed([t.strip() for t in train + evaluated])
        k = len(train)
        attack = QMIA(n_train=k)
        ours = attack.scores(feats[:k], ll[:k], feats[k:], ll[k:])
        project = principal_components(feats[:k], k // attack.texts_per_parameter - 1)
        theirs = leakpro_qmia_scores_transcription(
            project(feats[:k]), ll[:k], project(feats[k:]), ll[k:]
        )
        out[f"qmia vs LeakPro qmia.py ({label})"] = agreement(ours, theirs)
    return out


# -- probe ----------------------------------------------------------------------------------------


def bench_probe(client: Any, evaluated: list[str], train: list[str]) -> dict:
    import torch
    from attack_fixtures import (
        authors_collect_acts_transcription,
        authors_get_acts_transcription,
        authors_lrprobe_transcription,
    )

    from imprint.attacks.base import ScoringInputs
    from imprint.attacks.probe import PROMPT, PROXY_ROLE, Probe, proxy_split
    from imprint.requests.hidden_states import hidden_states

    attack = Probe(_train=tuple(train))
    ours = attack.score(ScoringInputs(tuple(evaluated), requests=client))["probe"]
    _, labels = proxy_split(len(train))
    layer, _w = attack.choose_layer(hidden_states(client, PROXY_ROLE, train, PROMPT), labels)
    target, proxy = client.local("target"), client.backends[PROXY_ROLE]
    out: dict[str, Any] = {"layer": int(layer)}
    for ids_from, start in (("imprint's ids", target.start_ids), ("authors' tokenisation", ())):
        statements = [PROMPT.replace("[TEXT]", t) for t in train]
        p_acts = authors_get_acts_transcription(
            proxy.model, target.tokenizer, statements, [layer], start
        )[layer]
        t_acts = authors_get_acts_transcription(
            target.model,
            target.tokenizer,
            [PROMPT.replace("[TEXT]", t) for t in evaluated],
            [layer],
            start,
        )[layer]
        d = p_acts.shape[1]
        gen = torch.Generator().manual_seed(0)  # fit_probe's initial weights
        init = ((torch.rand(d, generator=gen) * 2 - 1) / np.sqrt(d)).numpy()
        net = authors_lrprobe_transcription(
            authors_collect_acts_transcription(p_acts), labels, init
        )
        with torch.no_grad():
            x = torch.tensor(authors_collect_acts_transcription(t_acts))
            p = net(x).squeeze(-1).double().clamp(1e-12, 1 - 1e-12)
        out[f"probe vs authors ({ids_from}), logit"] = agreement(ours, torch.logit(p).numpy())
    return out


def main() -> None:
    import torch

    from imprint.backends.hf import HFLogprobBackend
    from imprint.requests.client import in_memory_requests

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--out", type=Path, default=Path("bench-authors-a.json"))
    args = parser.parse_args()
    from attack_fixtures import wikimia_rows

    torch.manual_seed(0)
    evaluated, held, bank = split(wikimia_rows(32))
    backend = HFLogprobBackend(args.model, dtype="float32", device="cpu")
    client = in_memory_requests(backend)
    report: dict[str, Any] = {"model": args.model, "evaluated": len(evaluated)}
    for name, run in (
        ("camia", lambda: bench_camia(client, evaluated, held, bank[:60])),
        ("qmia", lambda: bench_qmia(client, evaluated, {"10 texts": held, "100 texts": bank[60:]})),
        ("probe", lambda: bench_probe(client, evaluated, held)),
    ):
        t0 = time.perf_counter()
        report[name] = run()
        report[name]["seconds"] = round(time.perf_counter() - t0, 1)
        print(name, json.dumps(report[name], indent=1), flush=True)
    args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
