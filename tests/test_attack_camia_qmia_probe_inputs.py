"""CAMIA, QMIA and the probe on hard inputs: Chinese, Arabic and emoji texts, and texts longer
than the model's context (the tiny Llama reads 128 positions). Log-prob passes score such a text
in sliding windows (every token once); the probe's activations cut it to the tokens that fit
between its prompt's two parts (``context_ids``), so the last position is still the prompt's
end. Every score is finite; a prompt that leaves no room for text is refused by name."""

from __future__ import annotations

import json

import numpy as np
import pytest
from attack_fixtures import client_for

from imprint.attacks.probe import PROMPT
from imprint.errors import DataError
from imprint.requests.hidden_states import context_ids, hidden_states

LONG = " ".join(
    f"Membership inference number {i} asks whether a text was trained on." for i in range(30)
)
CHINESE = "成员推断攻击询问一段文本是否在训练数据中。语言模型会记住它见过的句子。"
ARABIC = "يسأل هجوم استنتاج العضوية عما إذا كان النص جزءا من بيانات التدريب."
EMOJI = "🙂🚀🔥 models remember 🧠📚✨ texts 🎉"
LONG_CHINESE = CHINESE * 12


def test_context_ids_keep_short_texts_whole_and_cut_long_ones_inside_the_prompt(tiny_model_dir):
    local = client_for(str(tiny_model_dir)).local("target")
    short = context_ids(local, PROMPT, CHINESE[:6])  # a byte-level BPE of 320: ~3 ids a char
    assert short == [*local.start_ids, *local.encode(PROMPT.replace("[TEXT]", CHINESE[:6]))]
    before, _, after = PROMPT.partition("[TEXT]")
    for text in (LONG, LONG_CHINESE):
        ids = context_ids(local, PROMPT, text)
        head = [*local.start_ids, *local.encode(before)]
        tail = local.encode(after)
        room = local.max_length - len(head) - len(tail)
        assert len(local.encode(text)) > local.max_length  # really longer than the context
        assert ids == [*head, *local.encode(text)[:room], *tail]
        assert len(ids) == local.max_length == 128
    with pytest.raises(DataError, match="leaving none for the text 'Membership"):
        context_ids(local, "x " * 200 + "[TEXT]", LONG)


def test_a_long_texts_activation_is_the_last_prompt_token_of_the_cut_ids(tiny_model_dir):
    import torch

    client = client_for(str(tiny_model_dir))
    local = client.local("target")
    acts = hidden_states(client, "target", [LONG, ARABIC, EMOJI], PROMPT)
    assert np.all(np.isfinite(acts))
    ids = context_ids(local, PROMPT, LONG)
    with torch.no_grad():
        out = local.model(torch.tensor([ids]), output_hidden_states=True).hidden_states
    np.testing.assert_allclose(acts[0][0], out[1][0, -1].numpy(), rtol=1e-5, atol=1e-5)


def test_log_prob_passes_score_every_token_of_a_long_text(tiny_model_dir):
    client = client_for(str(tiny_model_dir))
    local = client.local("target")
    stats = client.token_stats("target", [LONG, LONG + " " + LONG, CHINESE, EMOJI])
    for text, s in zip([LONG, LONG + " " + LONG, CHINESE, EMOJI], stats, strict=True):
        assert len(s.logp) == len(local.encode(text)) and np.all(np.isfinite(s.logp))
    assert len(stats[1].logp) > 2 * local.max_length  # CAMIA's repeats: windows, not an error


def test_camia_qmia_and_probe_score_non_latin_and_long_texts(tiny_model_dir, tmp_path):
    from imprint.run import RunConfig, execute_run

    members = [CHINESE, ARABIC, EMOJI, LONG, LONG_CHINESE, "A plain English member text."]
    nonmembers = [
        "另一段从未见过的中文文本。",
        "نص آخر لم يره النموذج من قبل.",
        "🌍🌙 unseen 🍀",
        LONG.replace("trained on", "never seen"),
        "Plain English, never trained on.",
        "Une phrase française jamais vue.",
        "Ещё один текст на русском языке.",
        "日本語の文章もあります。",
        "हिंदी में एक वाक्य।",
        "Ein deutscher Satz, nie gesehen.",
    ]
    rows = [{"input": t, "label": 1} for t in members] + [
        {"input": t, "label": 0} for t in nonmembers
    ]
    data = tmp_path / "scripts.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    result = execute_run(
        RunConfig(
            model=str(tiny_model_dir),
            data=str(data),
            attacks=("loss", "camia", "qmia", "probe"),
            params={
                "camia": {"n_reference": 4},
                "qmia": {"n_train": 4, "texts_per_parameter": 2, "epochs": 50},
                "probe": {"n_train": 4, "probe_epochs": 50},
            },
            shot_holdout=4,
            n_bootstrap=10,
            progress=False,
            blind=False,
            out=tmp_path / "run",
        )
    )
    texts = [s.text for s in result.samples]
    assert len(texts) == 12 and all(t in texts for t in members)  # 4 non-members held out
    for column in ("loss", "camia", "qmia", "probe"):
        assert np.all(np.isfinite(result.scores[column])), column
