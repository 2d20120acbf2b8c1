"""Games train (and sample) their texts after the start token scoring uses (game format 5); games
of older formats, trained after the tokenizer's BOS, are still scored after their BOS."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import save_tiny_llama
from game_pool import write_pool
from test_start_token import CHAT_TEMPLATE, _tokenizer

from imprint.backends.hf import HFLogprobBackend
from imprint.backends.start_token import TRAINED_START_FILE
from imprint.game import GameConfig, build_game, read_manifest
from imprint.game import build as build_mod
from imprint.game import texts as texts_mod
from imprint.game.start import LEGACY_NOTE, game_tokens, legacy_rule


def make_chat_model(folder: Path) -> Path:
    """A tiny random Llama whose BOS is SmolLM2-Instruct's chat marker ``<|im_start|>``."""
    tok = _tokenizer(
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"], "<|im_start|>", "<|im_end|>", CHAT_TEMPLATE
    )
    return save_tiny_llama(folder, tok)


@pytest.fixture(scope="module")
def chat_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_chat_model(tmp_path_factory.mktemp("chat-model"))


@pytest.fixture(scope="module")
def built(tmp_path_factory, chat_model_dir) -> tuple[Path, list[list[int]]]:
    """A game on the chat model, and the training sequences its build handed to train()."""
    root = tmp_path_factory.mktemp("chat-game")
    pool = write_pool(root / "pool.txt", n=30)
    config = GameConfig(
        model=str(chat_model_dir),
        pool=str(pool),
        pool_size=16,
        words=6,
        epochs=1,
        batch_size=8,
        max_length=64,
        canary_repetitions=(1,),
        canaries_per_repetition=1,
        canary_generator="random",
        canary_words=4,
    )
    seen: list[list[int]] = []
    real_train = build_mod.train

    def spy(model, sequences, *args, **kwargs):
        seen.extend(list(s) for s in sequences)
        return real_train(model, sequences, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(build_mod, "train", spy)
        mp.setenv("IMPRINT_CACHE_DIR", str(root / "cache"))
        folder = build_game(config, out=root / "game", device="cpu", progress=False)
    return folder, seen


def test_training_ids_begin_with_the_token_scoring_uses(built):
    folder, sequences = built
    backend = HFLogprobBackend(f"game:{folder}", device="cpu")  # --start-token auto
    tok = backend.tokenizer
    endoftext = tok.convert_tokens_to_ids("<|endoftext|>")
    assert backend.start_ids == (endoftext,)
    assert sequences and {s[0] for s in sequences} == {endoftext}
    assert tok.bos_token_id not in {s[0] for s in sequences}  # not the chat marker
    # EOS <|im_end|> is a chat marker too: a text ends with the document separator
    assert {s[-1] for s in sequences} == {endoftext}
    manifest = read_manifest(folder)
    assert manifest is not None and manifest["format"] == 5
    assert manifest["start_token"]["token"] == "<|endoftext|>"
    assert manifest["end_token"] == {"token": "<|endoftext|>", "id": endoftext}
    # reference models train with the game's recorded tokens
    assert (game_tokens(manifest, tok)[0].id, game_tokens(manifest, tok)[1]) == (endoftext,) * 2
    record = json.loads((folder / "model" / TRAINED_START_FILE).read_text())
    assert record["id"] == endoftext


def test_an_explicit_start_token_still_wins_on_a_new_game(built):
    folder, _ = built
    backend = HFLogprobBackend(f"game:{folder}", device="cpu", start_token="bos")
    assert backend.start_ids == (backend.tokenizer.bos_token_id,)


def _make_old(folder: Path, dest: Path) -> Path:
    """``folder`` as a format-4 build wrote it: no start token recorded anywhere."""
    import shutil

    shutil.copytree(folder, dest)
    (dest / "model" / TRAINED_START_FILE).unlink()
    manifest = json.loads((dest / "game.json").read_text())
    del manifest["start_token"], manifest["end_token"], manifest["format"]
    (dest / "game.json").write_text(json.dumps(manifest))
    return dest


def test_an_old_game_is_scored_after_the_bos_it_was_trained_after(built, tmp_path):
    folder, _ = built
    old = _make_old(folder, tmp_path / "old-game")
    backend = HFLogprobBackend(f"game:{old}", device="cpu")
    assert backend.start_ids == (backend.tokenizer.bos_token_id,)  # <|im_start|>
    described = backend.describe()["start_token"]
    assert described["token"] == "<|im_start|>" and described["reason"] == LEGACY_NOTE
    assert "format 4" in described["reason"]
    # its model folder given directly, and an old reference model, follow the same rule
    assert legacy_rule(old / "model") == ("bos", LEGACY_NOTE)
    ref = tmp_path / "ref-0"
    (ref / "model").mkdir(parents=True)
    (ref / "reference.json").write_text("{}")
    assert legacy_rule(ref / "model") == ("bos", LEGACY_NOTE)
    assert legacy_rule(folder / "model") is None  # a new game carries its record
    # reference models built now for the old game train as its target did: BOS ... EOS
    start, end = game_tokens(json.loads((old / "game.json").read_text()), backend.tokenizer)
    assert (start.id, end) == (backend.tokenizer.bos_token_id, backend.tokenizer.eos_token_id)


def test_a_folder_imprint_did_not_train_keeps_auto(chat_model_dir):
    backend = HFLogprobBackend(str(chat_model_dir), device="cpu")
    assert backend.start_token.text == "<|endoftext|>"
    assert legacy_rule(chat_model_dir) is None


def test_sampled_texts_follow_the_same_start_token(chat_model_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(chat_model_dir)
    model = AutoModelForCausalLM.from_pretrained(chat_model_dir).eval()
    firsts: list[int] = []
    real = model.generate

    def spy(**kwargs):
        rows, masks = kwargs["input_ids"].tolist(), kwargs["attention_mask"].tolist()
        for row, mask in zip(rows, masks, strict=True):
            firsts.append(row[mask.index(1)])
        return real(**kwargs)

    model.generate = spy
    texts_mod._sample_batch(
        model, tok, ["The quick", "In"], seed=0, max_new_tokens=3, temperature=1.0, top_k=0
    )
    assert firsts == [tok.convert_tokens_to_ids("<|endoftext|>")] * 2
