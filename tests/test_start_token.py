"""The start token: the document boundary, not a chat marker; an option; in manifest and key."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from imprint.backends.base import ScoreRequest
from imprint.backends.hf import HFLogprobBackend
from imprint.backends.start_token import choose_start_token
from imprint.cli import app
from imprint.errors import ConfigError
from imprint.signals.cache import SignalCache
from imprint.signals.needs import Need
from imprint.signals.plan import run_plan

# SmolLM2-Instruct's template: <|im_start|> opens every turn
CHAT_TEMPLATE = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}"
)
# Gemma's: the document BOS is written once, through the variable
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\n'"
    " + message['content'] + '<end_of_turn>\n' }}{% endfor %}"
)
TEXT = "Hurricane Ana, Ωμέγα, 東京: the council met in 2023."
_CORPUS = ["The quick brown fox jumps over the lazy dog.", "In 2023 the council met."] * 20


def _tokenizer(specials: list[str], bos: str, eos: str, template: str | None):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(_CORPUS, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=bos, eos_token=eos)
    fast.chat_template = template
    return fast


@pytest.fixture(scope="module")
def chat_tokenizer():
    return _tokenizer(
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], "<|im_start|>", "<|im_end|>", CHAT_TEMPLATE
    )


@pytest.fixture(scope="module")
def chat_model(chat_tokenizer):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(chat_tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    return LlamaForCausalLM(config).eval()


def _backend(model, tokenizer, start_token: str = "auto", **kw) -> HFLogprobBackend:
    return HFLogprobBackend(
        "chat-tiny", model=model, tokenizer=tokenizer, start_token=start_token, **kw
    )


def _reference_logp(model, ids: list[int]) -> np.ndarray:
    """Brute force: log p of ids[1:] given everything before, one full forward."""
    with torch.no_grad():
        logp = torch.log_softmax(model(torch.tensor([ids])).logits[0, :-1].float(), -1)
    return logp.gather(1, torch.tensor(ids[1:])[:, None])[:, 0].numpy()


def test_auto_takes_the_document_separator_when_bos_is_a_chat_marker(chat_model, chat_tokenizer):
    backend = _backend(chat_model, chat_tokenizer)
    eot = chat_tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert backend.start_token.text == "<|endoftext|>" and backend.start_ids == (eot,)
    assert "chat-turn marker" in backend.start_token.reason
    stats = backend.score([ScoreRequest(TEXT)])[0]
    ids = [eot, *backend.encode(TEXT)]
    np.testing.assert_allclose(stats.logp, _reference_logp(chat_model, ids), atol=1e-4)
    # and the numbers do differ from scoring after the chat marker
    marker = _backend(chat_model, chat_tokenizer, "bos").score([ScoreRequest(TEXT)])[0]
    assert marker.logp[0] != pytest.approx(stats.logp[0], abs=1e-4)


def test_auto_keeps_a_real_document_bos():
    gemma_like = _tokenizer(
        ["<pad>", "<eos>", "<bos>", "<start_of_turn>", "<end_of_turn>"],
        "<bos>",
        "<eos>",
        GEMMA_TEMPLATE,
    )
    chosen = choose_start_token(gemma_like)
    assert chosen.text == "<bos>" and chosen.id == gemma_like.bos_token_id
    plain = _tokenizer(["<s>", "</s>"], "<s>", "</s>", None)  # no template at all
    assert choose_start_token(plain).text == "<s>"
    # no BOS, EOS is a turn marker, a document separator exists: the separator
    no_bos = _tokenizer(["<|endoftext|>", "<|im_end|>"], "<|im_end|>", "<|im_end|>", None)
    no_bos.bos_token = None
    assert choose_start_token(no_bos).text == "<|endoftext|>"


def test_options_bos_none_and_literal(chat_model, chat_tokenizer):
    assert _backend(chat_model, chat_tokenizer, "bos").start_token.text == "<|im_start|>"
    literal = _backend(chat_model, chat_tokenizer, "<|im_end|>")
    assert literal.start_ids == (chat_tokenizer.convert_tokens_to_ids("<|im_end|>"),)
    none = _backend(chat_model, chat_tokenizer, "none")
    assert none.start_ids == () and none.bos_id == _backend(chat_model, chat_tokenizer).bos_id
    stats = none.score([ScoreRequest(TEXT)])[0]
    ids = none.encode(TEXT)
    assert len(stats) == len(ids) - 1  # the first text token is context only
    np.testing.assert_allclose(stats.logp, _reference_logp(chat_model, ids), atol=1e-4)
    assert none.count_tokens([TEXT]) == [len(ids)]


def test_none_scores_long_texts_in_windows(chat_model, chat_tokenizer):
    text = " ".join([TEXT] * 12)
    none = _backend(chat_model, chat_tokenizer, "none", max_length=16, stride=8)
    stats = none.score([ScoreRequest(text)])[0]
    np.testing.assert_array_equal(stats.token_ids, none.encode(text)[1:])


def test_bad_start_tokens_teach(chat_model, chat_tokenizer):
    with pytest.raises(ConfigError, match="not a special token"):
        _backend(chat_model, chat_tokenizer, "Ωμέγα 東京 long")
    with pytest.raises(ConfigError, match="empty"):
        _backend(chat_model, chat_tokenizer, "  ")
    one_token = chat_tokenizer.convert_ids_to_tokens(chat_tokenizer("T")["input_ids"])[0]
    with pytest.raises(ConfigError, match="start-token auto"):
        _backend(chat_model, chat_tokenizer, "none").score([ScoreRequest(one_token)])


def test_fingerprint_and_cache_follow_the_start_token(chat_model, chat_tokenizer, tmp_path):
    backends = {o: _backend(chat_model, chat_tokenizer, o) for o in ("auto", "bos", "none")}
    assert len({b.fingerprint for b in backends.values()}) == 3
    assert _backend(chat_model, chat_tokenizer, "<|endoftext|>").fingerprint == (
        backends["auto"].fingerprint  # the same token, however it was named
    )
    cache = SignalCache(tmp_path / "signals.sqlite")
    first, report = run_plan([TEXT], [Need()], {"target": backends["auto"]}, cache)
    second, report2 = run_plan([TEXT], [Need()], {"target": backends["bos"]}, cache)
    assert report2.per_model["target"].cache_hits == 0  # never served another token's signals
    assert report2.per_model["target"].executed == 1
    assert first.get()[0].logp[0] != pytest.approx(second.get()[0].logp[0], abs=1e-4)
    cache.close()


def test_cli_option_reaches_the_manifest(tiny_model_dir, tmp_path):
    out = tmp_path / "run"
    args = ["run", "--model", str(tiny_model_dir), "--data", "wikimia:32", "--attacks", "loss"]
    args += ["--n-per-label", "4", "--bootstrap", "10", "--no-blind", "--out", str(out)]
    res = CliRunner().invoke(app, [*args, "--start-token", "none"])
    assert res.exit_code == 0, res.output
    target = json.loads((out / "manifest.json").read_text())["models"]["target"]
    assert target["start_token"]["id"] is None and target["start_token"]["token"] is None
    assert json.loads((out / "manifest.json").read_text())["config"]["shared_args"] == {
        "start_token": "none"
    }


@pytest.mark.slow
def test_smollm2_scores_after_endoftext(monkeypatch):
    monkeypatch.setenv("IMPRINT_CACHE_DIR", str(Path.home() / ".cache" / "imprint"))
    backend = HFLogprobBackend("smollm2-135m", device="cpu", max_length=256)
    assert backend.tokenizer.bos_token == "<|im_start|>"  # the chat marker it must avoid
    assert backend.start_token.text == "<|endoftext|>" and backend.start_ids == (0,)
    assert backend.describe()["start_token"]["token"] == "<|endoftext|>"


def test_keywords_in_any_case_and_ordinary_words_refused(chat_tokenizer):
    """'None' is the keyword none, not the word "None" before every text; a literal must be a
    special token."""
    from imprint.backends.start_token import choose_start_token

    assert choose_start_token(chat_tokenizer, "None").id is None
    assert choose_start_token(chat_tokenizer, "AUTO") == choose_start_token(chat_tokenizer, "auto")
    assert choose_start_token(chat_tokenizer, "Bos") == choose_start_token(chat_tokenizer, "bos")
    with pytest.raises(ConfigError, match="not a special token"):
        choose_start_token(chat_tokenizer, "the")
