"""The option letters' next-token log-probabilities after a multiple-choice prompt (DE-COP).

Duarte et al.'s code for open models (``2_decop_hf.py``) reads the logits of the letter tokens
A-D where the model gives its answer, softmaxes those four and takes the argmax, so every
question gets an answer; nothing is parsed. A :class:`LetterRequest` asks for that with one
forward pass over the prompt and no generation: under the model's full next-token distribution
after the prompt (the chat template applied where the tokenizer has one, as for generation),
the log-probability of each letter, summed over the letter's single-token spellings (``"A"``
and ``" A"``: which one a model writes after "Answer:" depends on the tokenizer and on the
template). Result: ``{"logp": [log p(letter) per letter], "mass": sum of the letters'
probabilities}`` (the mass says how much of the model's next token the letters hold).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from imprint.errors import ConfigError
from imprint.requests.kinds import Request, require_local


@dataclass(frozen=True)
class LetterRequest(Request):
    """The letters' log-probabilities as the next token after ``prompt`` (see module doc)."""

    kind: ClassVar[str] = "letter_logprobs"
    prompt: str
    letters: str = "ABCD"
    task: str = "answer"  # the prompt is an instruction: chat template where there is one

    batch_size: ClassVar[int] = 4

    def size(self) -> int:
        return len(self.prompt)

    @classmethod
    def execute(cls, backend: Any, batch: Sequence[Any]) -> list[Any]:
        return answer_letters(require_local(backend, "letter log-probabilities"), batch)


def letter_token_ids(hf: Any, letters: str) -> list[tuple[int, ...]]:
    """Per letter, the distinct token ids that spell it alone, bare or after one space; a
    letter with no single-token spelling cannot be read from one next-token distribution."""
    out: list[tuple[int, ...]] = []
    for letter in letters:
        spellings = (hf.encode(letter), hf.encode(" " + letter))
        ids = tuple(dict.fromkeys(int(s[0]) for s in spellings if len(s) == 1))
        if not ids:
            raise ConfigError(
                f"de_cop decision='letter_logits': the target's tokenizer has no single token "
                f"for the option letter {letter!r} (nor {' ' + letter!r}); use decision=parse"
            )
        out.append(ids)
    return out


def letter_logprobs(logits: np.ndarray, ids: Sequence[Sequence[int]]) -> tuple[np.ndarray, float]:
    """(log p(letter) for each letter, total letter probability) from one next-token logit
    vector of shape (V,): log-softmax over the whole vocabulary, then per letter the log of the
    summed probabilities of its token ids ``ids[letter]``."""
    z = np.asarray(logits, np.float64)
    logp = z - (z.max() + np.log(np.exp(z - z.max()).sum()))
    per_letter = np.array([np.logaddexp.reduce(logp[list(t)]) for t in ids])
    return per_letter, float(np.exp(per_letter).sum())


def answer_letters(hf: Any, batch: Sequence[LetterRequest]) -> list[dict[str, Any]]:
    """Answer ``batch`` with the local transformers backend ``hf``: one right-padded forward
    over the prompts, the vocabulary projection at each prompt's last position only."""
    import torch

    from imprint.backends.text import prompt_ids

    rows = [prompt_ids(hf, r.prompt, r.task) for r in batch]
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), hf.pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = 1
    base = getattr(hf.model, hf.model.base_model_prefix)
    last = torch.tensor([len(r) - 1 for r in rows])
    with torch.no_grad(), hf.attention():
        hidden = base(input_ids=ids.to(hf.device), attention_mask=mask.to(hf.device))
        rows_hidden = hidden.last_hidden_state[torch.arange(len(rows)), last.to(hf.device)]
        vocab = int(hf.model.config.vocab_size)
        logits = hf.head(rows_hidden).float()[:, :vocab].cpu().numpy()
    out = []
    for request, row in zip(batch, logits, strict=True):
        per_letter, mass = letter_logprobs(row, letter_token_ids(hf, request.letters))
        out.append({"logp": [float(v) for v in per_letter], "mass": mass})
    return out
