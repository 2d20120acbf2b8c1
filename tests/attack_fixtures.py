"""Shared scaffolding of the camia, qmia and probe tests and of ``benchmarks/bench_authors_a.py``:
WikiMIA texts, an in-memory request client, a run fitted on held-out non-members, and the
TRANSCRIPTIONS of the authors' code those attacks are compared with.

Every class or function named ``*_transcription`` / ``*Transcription`` below is a TRANSCRIPTION
FOR COMPARISON ONLY, not part of imprint: the reference code re-typed from reading it (LeakPro's
CAMIA branch and ``qmia.py``; ``zhliu0106/probing-lm-data``, the ArxivMIA paper's code), to run
on given inputs. None of it is imported by the package.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

WIKIMIA = Path(__file__).resolve().parents[2] / "shared" / "data" / "wikimia"


def wikimia_rows(length: int = 32) -> list[dict[str, Any]]:
    """The rows of WikiMIA at ``length`` words, in file order."""
    path = WIKIMIA / f"WikiMIA_length{length}.jsonl"
    return [json.loads(x) for x in path.open(encoding="utf-8")]


def wikimia_texts(n: int, length: int = 32) -> list[str]:
    """The first ``n`` WikiMIA texts (members and non-members as they come)."""
    return [r["input"] for r in wikimia_rows(length)[:n]]


def client_for(model: str, **backend_args: Any) -> Any:
    """An in-memory request client over a local Hugging Face model (role ``target``)."""
    from imprint.backends.hf import HFLogprobBackend
    from imprint.requests.client import in_memory_requests

    return in_memory_requests(HFLogprobBackend(model, device="cpu", **backend_args))


def run_fitted_on_held_out(
    model_dir: Path, tmp_path: Path, attack: str, params: dict[str, Any], held_out: int
) -> Any:
    """A run of loss and ``attack`` on 5 + 8 WikiMIA texts, ``held_out`` non-members held out
    (the attack fits on them; they leave every attack's evaluation)."""
    from conftest import wikimia_subset

    from imprint.run import RunConfig, execute_run

    return execute_run(
        RunConfig(
            model=str(model_dir),
            data=str(wikimia_subset(tmp_path, 5, 8)),
            attacks=("loss", attack),
            params={attack: params},
            shot_holdout=held_out,
            n_bootstrap=10,
            progress=False,
            blind=False,
            out=tmp_path / "run",
        )
    )


# -- CAMIA: LeakPro's CAMIA branch ---------------------------------------------------------------


class LeakProCAMIATranscription:
    """TRANSCRIPTION FOR COMPARISON ONLY (not part of imprint): the feature assembly of
    ``SignalExtractor.gather_signals_for_batch`` and the ``Combiner`` of LeakPro's CAMIA branch
    (``leakpro/attacks/mia_attacks/camia.py``), re-typed to run on given per-token losses. The
    losses of the text and of the text repeated are the inputs (LeakPro computes them itself);
    ``directions`` is LeakPro's per-feature tail setting."""

    cuts = {"T": None, "200": 200, "300": 300}

    @staticmethod
    def replicate(seq, desired):
        if desired is None or not seq or len(seq) >= desired:
            return list(seq)
        out = list(seq)
        while len(out) < desired:
            out.extend(seq[: desired - len(out)])
        return out

    @staticmethod
    def count_below(seq, thr, tp):
        sub = seq if tp is None else seq[:tp]
        return (sum(v <= thr for v in sub) / len(sub)) if sub else 0.0

    @staticmethod
    def count_below_mean(seq):
        if not seq:
            return 0.0
        m = float(np.mean(seq))
        return sum(v <= m for v in seq) / len(seq)

    @staticmethod
    def count_below_prev_mean(sl):
        if len(sl) <= 1:
            return 0.0
        below, csum = 0, sl[0]
        for i, v in enumerate(sl[1:], 1):
            below += v <= csum / i
            csum += v
        return below / (len(sl) - 1)

    @staticmethod
    def lz(seq, bins, tp):
        sub = seq if tp is None else seq[:tp]
        if not sub:
            return 0.0
        arr = np.asarray(sub)
        lo, hi = arr.min(), arr.max()
        if hi - lo < 1e-12:
            return 1.0
        edges = np.linspace(lo, hi + 1e-9, bins)
        symbols = "".join(chr(65 + np.digitize(v, edges)) for v in arr)
        i, c = 0, 1
        while i < len(symbols) - 1:
            width = 1
            while symbols[i : i + width] in symbols[:i] and i + width < len(symbols):
                width += 1
            i += width
            c += 1
        return float(c)

    def slope(self, seq, tp):
        if not seq:
            return 0.0
        y = np.asarray(self.replicate(seq, tp)[:tp])
        x = np.arange(len(y))
        var = np.mean((x - x.mean()) ** 2)
        if var == 0:
            return 0.0
        return float(np.mean((x - x.mean()) * (y - y.mean())) / var)

    def apen(self, seq, tp, m=8, r=0.8):
        seq = self.replicate(seq, tp)[:tp]
        if len(seq) < m + 2:
            return 0.0
        vals = np.asarray(seq)

        def phi(mm):
            n = len(vals) - mm + 1
            pats = np.array([vals[i : i + mm] for i in range(n)])
            c = np.sum(np.max(np.abs(pats[:, None] - pats[None, :]), axis=2) <= r, axis=0) / n
            return np.mean(np.log(c + 1e-12))

        return float(phi(m) - phi(m + 1))

    def features(self, base, ids, rep1, rep2):
        d = {}
        mean = lambda s: float(np.mean(s)) if len(s) else 0.0  # noqa: E731
        diff = lambda a, b: (a - b) if (np.isfinite(a) and np.isfinite(b)) else 0.0  # noqa: E731
        # every cut's repeats are the whole text's here (imprint's stated deviation)
        seqs = {
            tag: (base if tp is None else base[:tp], rep1, rep2) for tag, tp in self.cuts.items()
        }
        for tag, tp in self.cuts.items():
            toks = ids if tp is None else ids[:tp]
            div = max(len(set(toks)) / len(toks) if toks else 0.0, 1e-12)
            vb, vr1, vr2 = map(mean, seqs[tag])
            for fam, post in (
                ("cut", lambda x: x),
                ("cal", lambda x, d=div: x / d),
                ("ppl", lambda x: math.exp(x)),
                ("calppl", lambda x, d=div: math.exp(x) / d),
            ):
                b_, r1_, r2_ = map(post, (vb, vr1, vr2))
                d[f"{fam}_{tag}"] = b_
                d[f"{fam}_{tag}_rep1_diff"] = diff(b_, r1_)
                d[f"{fam}_{tag}_rep2_diff"] = diff(b_, r2_)
        for tau in (2.5, 3.0, 3.5):
            b, r1, r2 = (1 - self.count_below(x, tau, 200) for x in seqs["200"])
            d[f"cb_const{tau}"] = b
            d[f"cb_const{tau}_rep1_diff"] = diff(b, r1)
            d[f"cb_const{tau}_rep2_diff"] = diff(b, r2)
        for tag in self.cuts:
            b, r1, r2 = (1 - self.count_below_mean(x) for x in seqs[tag])
            d[f"cbm_{tag}"] = b
            d[f"cbm_{tag}_rep1_diff"] = diff(b, r1)
            d[f"cbm_{tag}_rep2_diff"] = diff(b, r2)
            d[f"cbpm_{tag}"] = 1 - self.count_below_prev_mean(seqs[tag][0])
        for bins in (16, 32):
            b, r1, r2 = (self.lz(x, bins, 200) for x in seqs["200"])
            d[f"lz_bins{bins}"] = b
            d[f"lz_bins{bins}_rep1_diff"] = diff(r1, b)
            d[f"lz_bins{bins}_rep2_diff"] = diff(r2, b)
        for tp in (256, 512):
            d[f"slope_{tp}"] = -self.slope(base, tp)
        d["apen_256"] = -self.apen(base, 256)
        return d

    @staticmethod
    def score(dicts, nonmember_dicts, directions, clip=1e-5, dtype=np.float32):
        ref = {}
        for dd in nonmember_dicts:
            for k, v in dd.items():
                if np.isfinite(v):
                    ref.setdefault(k, []).append(float(v))
        ref = {k: np.sort(np.asarray(v, dtype=dtype)) for k, v in ref.items()}
        out = []
        for dd in dicts:
            total = 0.0
            for k, v in dd.items():
                if k not in ref or not np.isfinite(v):
                    continue
                arr = ref[k]
                n = arr.size
                rank = np.searchsorted(arr, v, side="right")
                p = (n - rank + 1) / (n + 1) if directions.get(k) == "higher" else rank / (n + 1)
                total += -2.0 * math.log(min(max(p, clip), 1.0 - clip))
            out.append(total)
        return out


# -- QMIA: LeakPro's qmia.py ----------------------------------------------------------------------


def leakpro_qmia_transcription(features, targets, quantiles, *, epochs, lr, weight_decay, seed):
    """TRANSCRIPTION FOR COMPARISON ONLY (not part of imprint): LeakPro's ``AttackQMIA`` training
    (``leakpro/attacks/mia_attacks/qmia.py``: a linear ``regressor`` head, ``PinballLoss`` summed
    over quantiles and averaged over the batch, Adam, a DataLoader of batch 64 without shuffling)
    re-typed on given features; its ``target.long()`` cast is left out (a bug: it truncates the
    regression targets). Returns the fitted head."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    x = torch.tensor(features, dtype=torch.float32)
    y = torch.tensor(targets, dtype=torch.float32)
    regressor = torch.nn.Linear(x.shape[1], len(quantiles))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        bound = 1.0 / np.sqrt(x.shape[1])
        regressor.weight.uniform_(-bound, bound, generator=gen)
        regressor.bias.uniform_(-bound, bound, generator=gen)
    qs = torch.tensor(quantiles, dtype=torch.float32)
    opt = torch.optim.Adam(regressor.parameters(), lr=lr, weight_decay=weight_decay)
    loader = DataLoader(TensorDataset(x, y), batch_size=64)
    for _ in range(epochs):
        for data, target in loader:
            opt.zero_grad(set_to_none=True)
            errors = target.unsqueeze(1) - regressor(data)
            loss = torch.mean(torch.sum(torch.max(qs * errors, (qs - 1) * errors), dim=1))
            loss.backward()
            opt.step()
    return regressor


def leakpro_qmia_scores_transcription(train_x, train_ll, x, ll, *, alpha=0.1, seed=0):
    """LL(x) - q(x) with q from :func:`leakpro_qmia_transcription` at tau = 1 - alpha, targets
    standardised as imprint does (LeakPro's image-model targets are not; same ranking)."""
    import torch

    centre, scale = float(np.mean(train_ll)), float(np.std(train_ll))
    head = leakpro_qmia_transcription(
        train_x,
        (np.asarray(train_ll) - centre) / scale,
        [1.0 - alpha],
        epochs=1000,
        lr=1e-2,
        weight_decay=1e-4,
        seed=seed,
    )
    with torch.no_grad():
        q = head(torch.tensor(np.asarray(x), dtype=torch.float32)).squeeze(-1).double().numpy()
    return np.asarray(ll, np.float64) - (q * scale + centre)


# -- probe: zhliu0106/probing-lm-data -------------------------------------------------------------


def authors_lrprobe_transcription(acts, labels, init, lr=0.001, weight_decay=0.1, epochs=1000):
    """TRANSCRIPTION FOR COMPARISON ONLY (not part of imprint): ``LRProbe`` and
    ``LRProbe.from_data`` of the authors' ``src/run_probe.py`` (zhliu0106/probing-lm-data),
    re-typed; ``init`` replaces the draw of torch's global RNG so both start alike."""
    import torch

    net = torch.nn.Sequential(torch.nn.Linear(acts.shape[-1], 1, bias=False), torch.nn.Sigmoid())
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor(init, dtype=torch.float32)[None, :])
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=weight_decay)
    x = torch.tensor(acts, dtype=torch.float32)
    y = torch.tensor(labels, dtype=torch.float32)
    for _ in range(epochs):
        opt.zero_grad()
        loss = torch.nn.BCELoss()(net(x).squeeze(-1), y)
        loss.backward()
        opt.step()
    return net


def authors_collect_acts_transcription(acts):
    """TRANSCRIPTION FOR COMPARISON ONLY: ``ActDataset.collect_acts``'s centring and scaling of
    one set's activations by its own mean and ``torch.std`` (ddof 1)."""
    import torch

    a = torch.tensor(np.asarray(acts), dtype=torch.float32)
    a = a - torch.mean(a, dim=0)
    return (a / torch.std(a, dim=0)).numpy()


def authors_get_acts_transcription(model, tokenizer, statements, layers, start_ids=()):
    """TRANSCRIPTION FOR COMPARISON ONLY: ``get_acts`` of the authors' ``src/generate_acts.py``:
    a forward hook on each decoder layer (``model.model.layers[i]``), one text at a time, the
    hook's output at the last position. The authors encode with ``tokenizer.encode`` (its own
    special tokens); ``start_ids`` (imprint's start token) is put first when given, so both read
    the same ids. Their hook unpacks a tuple output; a layer returning a tensor is read as is.
    Returns {layer: (n, hidden) float32}."""
    import torch

    outs: dict[int, Any] = {}

    def hook_for(layer):
        def hook(_module, _inputs, output):
            outs[layer] = output[0] if isinstance(output, tuple) else output

        return hook

    handles = [model.model.layers[i].register_forward_hook(hook_for(i)) for i in layers]
    acts: dict[int, list[Any]] = {i: [] for i in layers}
    try:
        with torch.no_grad():
            for statement in statements:
                ids = [*start_ids, *tokenizer.encode(statement, add_special_tokens=not start_ids)]
                model(torch.tensor([ids]))
                for i in layers:
                    acts[i].append(outs[i].reshape(-1, outs[i].shape[-1])[-1])
    finally:
        for handle in handles:
            handle.remove()
    return {i: torch.stack(a).float().numpy() for i, a in acts.items()}
