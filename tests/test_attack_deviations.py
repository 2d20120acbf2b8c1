"""Differences from the paper or the authors' code: printed by ``imprint attacks``, recorded in the
manifest and listed in the docs' attack reference, for every attack that declares one."""

from __future__ import annotations

from pathlib import Path

from attack_listing import attack_entries, said
from conftest import quiet_wikimia_run
from typer.testing import CliRunner

from imprint.attacks import available_attacks
from imprint.attacks.loss import Loss
from imprint.cli import app

README = Path(__file__).resolve().parents[1] / "README.md"


def test_imprint_attacks_prints_every_declared_deviation(monkeypatch):
    monkeypatch.setattr(Loss, "deviations", ("scores the first token after the start token",))
    entries = attack_entries(CliRunner().invoke(app, ["attacks"]).output)  # wrapped at 80
    for name, cls in available_attacks().items():
        for deviation in cls.deviations:
            assert said(f"differs: {deviation}") in entries[name], name
    assert "differs: scores the first token" in entries["loss"]


def test_every_declared_deviation_is_in_the_attack_reference_docs():
    """The docs' attack reference (docs/reference/attacks.md) is written from the registry by
    the MkDocs hook; every deviation an attack declares must appear under its name."""
    import importlib.util

    hook = README.parent / "docs" / "hooks" / "imprint_docs.py"
    spec = importlib.util.spec_from_file_location("imprint_docs", hook)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    page = module.attacks_markdown()
    for name, cls in available_attacks().items():
        entry = page.split(f"### {name} {{ #{name} }}", 1)[1].split("\n### ", 1)[0]
        for deviation in cls.deviations:
            assert module._inline(deviation) in entry, (
                f"{name}: {deviation!r} not in its docs entry"
            )


def test_the_manifest_records_the_deviations_of_the_attacks_run(
    tiny_model_dir, tmp_path, monkeypatch
):
    monkeypatch.setattr(Loss, "deviations", ("one stated difference",))
    result = quiet_wikimia_run(
        tmp_path, tiny_model_dir, n_per_label=4, n_bootstrap=10, attacks=("loss", "zlib")
    )
    assert result.manifest["attack_deviations"] == {"loss": ["one stated difference"]}


def test_differences_from_the_authors_code_are_declared():
    """Issue 37 item 20: InfoRMIA's authors' code (the MIMIR fork) was found, RMIA's population
    term differs from Privacy Meter's, DUCI's from the authors' text code; each is declared
    where `imprint attacks`, the docs and the manifests read it."""
    import imprint.attacks.informia as informia_module
    from imprint.attacks.informia import InfoRMIA
    from imprint.attacks.rmia import RMIA
    from imprint.documents.duci import DEVIATIONS

    informia = " ".join(InfoRMIA.deviations)
    assert "taojiashu/mimir" in informia and "log-probabilities" in informia
    assert "authors' code were not reachable" not in informia
    assert "authors' own code was not found" not in (informia_module.__doc__ or "")
    assert any("K/2 largest" in d and "rmia_offline" in d for d in RMIA.deviations)
    duci = " ".join(DEVIATIONS)
    assert "1/perplexity" in duci and "'robust' threshold" in duci and "clips the estimate" in duci
    page = (README.parent / "docs" / "attacks" / "deviations.md").read_text()
    for needle in ("taojiashu/mimir", "keeps the K/2 largest", "1/perplexity"):
        assert needle in " ".join(page.split()), needle


def _authors_informia(log_p, log_refs, target_ids):
    """The authors' per-token rule (MIMIR's InfoRMIAToken, unnegated, nats), written for this
    check: the references' mean log-probability g, then log p(x) - g(x) - sum_v e^g (log p - g)."""
    import numpy as np

    g = np.mean(log_refs, axis=0)
    rows = np.arange(len(target_ids))
    return log_p[rows, target_ids] - g[rows, target_ids] - (np.exp(g) * (log_p - g)).sum(-1)


def test_informia_equals_the_authors_rule_with_one_reference_model():
    import math

    import numpy as np
    import torch

    from imprint.attacks.informia import informia_tokens
    from imprint.requests.pair_tokens import pair_token_stats

    gen = torch.Generator().manual_seed(0)
    target = torch.randn(12, 50, generator=gen, dtype=torch.float64)
    refs = [torch.randn(12, 50, generator=gen, dtype=torch.float64) for _ in range(3)]
    ids = torch.randint(0, 50, (12,), generator=gen)

    def both(k):
        s = pair_token_stats(target, refs[:k], ids)
        ours = informia_tokens(s["target_logp"], s["mix_logp"], s["kl"])
        logs = [torch.log_softmax(r, -1).numpy() for r in refs[:k]]
        theirs = _authors_informia(torch.log_softmax(target, -1).numpy(), logs, ids.numpy())
        return ours, theirs / math.log(2)

    ours, theirs = both(1)
    assert np.allclose(ours, theirs, atol=1e-12)  # one reference: the same score, in bits
    ours, theirs = both(3)
    assert np.abs(ours - theirs).max() > 0.01  # several: mixture vs mean log-probability
