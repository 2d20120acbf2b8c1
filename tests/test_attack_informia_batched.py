"""Token-level InfoRMIA's ``pair_tokens`` batched: texts of a batch share each model's forwards
(right-padded, masked) and give the results of one text at a time, on the real SmolLM2-135M;
non-Latin texts, emoji and a text longer than the context, for InfoRMIA and RaMIA."""

from __future__ import annotations

import copy
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from imprint.errors import ConfigError
from imprint.requests.pair_tokens import ModelGroup, PairTokensRequest, pair_token_stats

MIXED = [
    "北京是中华人民共和国的首都，也是全国的政治和文化中心。",
    "مرحبا بالعالم، هذه جملة عربية قصيرة للاختبار.",
    "Party time 🎉🎉 with the family 👩‍👩‍👧 and a cake 🎂.",
    "Hurricane Ana was the second tropical cyclone to threaten Hawaii in 2014, and the "
    "first of the season to make landfall; it formed far to the southeast of the islands.",
    "The quick brown fox.",
    "Zürich, Genève und Lugano sind Städte der Schweiz.",
]
# a batched forward and a forward of one text run other kernel shapes: float32 rounding only
TOLERANCE = 1e-4  # nats, on log p, log q and the KL


def _one_at_a_time(group: ModelGroup, text: str) -> dict[str, np.ndarray]:
    """The reference: each model's full logits on this text alone, reduced as before batching."""
    import torch

    target = group.target.local_model()
    ids = [*target.start_ids, *target.encode(text)]
    tensor = torch.tensor([ids])
    with torch.no_grad():
        lp = target.model(input_ids=tensor).logits[0, :-1].float()
        lq = [r.local_model().model(input_ids=tensor).logits[0, :-1].float() for r in group.refs]
        return {"ids": np.array(ids[1:]), **pair_token_stats(lp, lq, torch.tensor(ids[1:]))}


@pytest.fixture(scope="module")
def smollm2_group() -> ModelGroup:
    """SmolLM2-135M and two noised copies of it as reference models (the same tokenizer)."""
    import os

    import torch

    from imprint.backends.hf import HFLogprobBackend

    old = os.environ.get("IMPRINT_CACHE_DIR")
    os.environ["IMPRINT_CACHE_DIR"] = str(Path.home() / ".cache" / "imprint")  # the conversion
    try:
        target = HFLogprobBackend("smollm2-135m", dtype="float32")
    finally:
        if old is None:
            os.environ.pop("IMPRINT_CACHE_DIR")
        else:
            os.environ["IMPRINT_CACHE_DIR"] = old
    refs = []
    for seed in (1, 2):
        model = copy.deepcopy(target.model)
        gen = torch.Generator().manual_seed(seed)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=gen) * 0.05 * p.std().clamp_min(1e-3))
        refs.append(
            HFLogprobBackend(
                "smollm2-135m", name=f"r{seed}", model=model, tokenizer=target.tokenizer
            )
        )
    return ModelGroup(target, refs, ["r1", "r2"])


@pytest.mark.slow
def test_batched_equals_one_at_a_time_on_smollm2(smollm2_group):
    import torch

    requests = [PairTokensRequest(text=t) for t in MIXED]
    batched = PairTokensRequest.execute(smollm2_group, requests)  # one padded batch of 6
    alone = [PairTokensRequest.execute(smollm2_group, [r])[0] for r in requests]
    worst = 0.0
    for text, b, a in zip(MIXED, batched, alone, strict=True):
        ref = _one_at_a_time(smollm2_group, text)
        assert b["ids"] == a["ids"] == ref["ids"].tolist()
        for field in ("target_logp", "mix_logp", "kl"):
            for other in (a[field], ref[field]):
                diff = float(np.max(np.abs(np.subtract(b[field], other))))
                worst = max(worst, diff)
                assert diff < TOLERANCE, (text[:20], field, diff)
        assert np.isfinite(b["kl"]).all() and min(b["kl"]) >= 0
        # the pieces join into the text: a multi-byte character at the token completing it
        assert "".join(b["pieces"]) == text
    print(f"max |batched - one at a time| = {worst:.2e} nats (threads {torch.get_num_threads()})")
    # texts of two temperatures in one batch: each is the text's own, at its own temperature
    mixed_t = [PairTokensRequest(text=MIXED[0], temperature=2.0), requests[4]]
    out = PairTokensRequest.execute(smollm2_group, mixed_t)
    assert np.allclose(out[1]["kl"], batched[4]["kl"], atol=TOLERANCE)
    assert not np.allclose(out[0]["kl"], batched[0]["kl"], atol=TOLERANCE)


@pytest.mark.slow
def test_informia_token_scores_align_with_multibyte_tokens(smollm2_group):
    from imprint.attacks.informia import InfoRMIA
    from imprint.requests.client import in_memory_requests

    group = smollm2_group
    requests = in_memory_requests(
        group.target, roles=dict(zip(group.names, group.refs, strict=True))
    )
    tokens = InfoRMIA(models=tuple(group.names)).token_scores(requests, MIXED[:3])
    tokenizer = group.target.tokenizer
    for text, t in zip(MIXED[:3], tokens, strict=True):
        assert (
            len(t["ids"]) == len(t["pieces"]) == len(t["scores"]) and np.isfinite(t["scores"]).all()
        )
        assert "".join(t["pieces"]) == text
        # every piece is what its token adds to the decoded prefix: a character's last byte token
        for i in range(len(t["ids"])):
            prefix = tokenizer.decode(t["ids"][: i + 1]).rstrip("\ufffd")
            assert prefix == "".join(t["pieces"][: i + 1])
    assert "" in tokens[0]["pieces"]  # Chinese: byte tokens that complete no character alone


def test_non_latin_and_too_long_texts_on_tiny_models(tiny_model_dir, tiny_ref_dir, tmp_path):
    """InfoRMIA and RaMIA score Chinese, Arabic and emoji texts (finite); InfoRMIA refuses a
    text longer than the context naming it, RaMIA scores it (sliding windows)."""
    from conftest import make_tiny_model

    from imprint.attacks.informia import InfoRMIA
    from imprint.backends.hf import HFLogprobBackend
    from imprint.requests.client import in_memory_requests
    from imprint.run import RunConfig, execute_run

    target, ref = HFLogprobBackend(str(tiny_model_dir)), HFLogprobBackend(str(tiny_ref_dir))
    requests = in_memory_requests(target, roles={"base": ref})
    tokens = InfoRMIA(models=("base",)).token_scores(requests, MIXED[:3])
    for text, t in zip(MIXED[:3], tokens, strict=True):
        assert np.isfinite(t["scores"]).all() and "".join(t["pieces"]) == text
    long_text = "Lorem ipsum dolor sit amet " * 60  # > 128 tokens, the tiny models' context
    with pytest.raises(
        ConfigError, match=r"text 'Lorem ipsum dolor sit amet Lorem.*tokens, more than"
    ):
        InfoRMIA(models=("base",)).token_scores(requests, [MIXED[0], long_text])
    # RaMIA through a run, references from a manifest
    texts = [*MIXED[:3], long_text, MIXED[4], MIXED[5]]
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(
            json.dumps({"text": t, "label": i % 2}, ensure_ascii=False) + "\n"
            for i, t in enumerate(texts)
        )
    )
    ids = [f"d:{i + 1}" for i in range(len(texts))]
    third = make_tiny_model(tmp_path / "third", seed=2)
    models = [
        {"name": "r0", "spec": str(tiny_ref_dir), "members": ids[:3]},
        {"name": "r1", "spec": str(third), "members": ids[3:]},
    ]
    (tmp_path / "m.json").write_text(json.dumps({"models": models}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = execute_run(
            RunConfig(
                model=str(tiny_model_dir), data=str(data), out=tmp_path / "run",
                references=str(tmp_path / "m.json"), attacks=("ramia",),
                params={"ramia": {"sample_size": 4, "trim": "none", "a": 0.5}},
                n_bootstrap=20, blind=False, progress=False, shot_holdout=0,
            )
        )  # fmt: skip
    assert np.isfinite(result.scores["ramia"]).all() and len(result.scores["ramia"]) == len(texts)
