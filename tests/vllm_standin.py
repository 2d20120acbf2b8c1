"""A stand-in for ``vllm.LLM`` (vLLM needs a CUDA build that cannot be installed here).

It keeps vLLM's call shapes (``generate(prompts, SamplingParams)`` returning outputs with
``prompt_token_ids`` / ``prompt_logprobs`` of ``Logprob(logprob, rank)`` entries, ``get_tokenizer``,
``llm_engine.model_config``) but computes prompt log-probs with the real tiny transformers model the
spec points at, so imprint's vLLM conversion can be checked against its hf backend.
Sampling returns words of the prompt (seeded), enough for the black-box paths.
"""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any


class StandInLLM:
    made: list[StandInLLM] = []

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        StandInLLM.made.append(self)
        self._model: Any = None
        self._tokenizer: Any = None
        max_len = kwargs.get("max_model_len") or 64
        self.llm_engine = SimpleNamespace(
            model_config=SimpleNamespace(max_model_len=max_len, get_vocab_size=lambda: 320)
        )

    def get_tokenizer(self) -> Any:
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.kwargs["model"])
        return self._tokenizer

    def generate(self, prompts: list[Any], params: Any, use_tqdm: bool = False) -> list[Any]:
        if getattr(params, "prompt_logprobs", None):
            return [self._prompt_logprobs(p["prompt_token_ids"]) for p in prompts]
        rng = random.Random(params.seed)
        results = []
        for prompt in prompts:
            words = prompt.split() or ["x"]
            outputs = [
                SimpleNamespace(
                    text=" " + " ".join(rng.choice(words) for _ in range(4)), token_ids=[0] * 4
                )
                for _ in range(params.n)
            ]
            results.append(SimpleNamespace(outputs=outputs))
        return results

    def _prompt_logprobs(self, ids: list[int]) -> Any:
        import torch
        from transformers import AutoModelForCausalLM

        if self._model is None:
            self._model = AutoModelForCausalLM.from_pretrained(self.kwargs["model"]).eval()
        with torch.no_grad():
            logits = self._model(input_ids=torch.tensor([ids])).logits[0].float()
        logp = torch.log_softmax(logits, -1)
        entries: list[Any] = [None]
        for pos in range(1, len(ids)):
            row = logp[pos - 1]
            actual, best = ids[pos], int(row.argmax())
            rank = int((row > row[actual]).sum()) + 1
            entry = {actual: SimpleNamespace(logprob=float(row[actual]), rank=rank)}
            entry.setdefault(best, SimpleNamespace(logprob=float(row[best]), rank=1))
            entries.append(entry)
        return SimpleNamespace(prompt_token_ids=list(ids), prompt_logprobs=entries, outputs=[])


def install(monkeypatch: Any) -> type[StandInLLM]:
    """Put the stand-in where ``import vllm`` finds it (with ``vllm.inputs.TokensPrompt``)."""
    import sys
    import types

    module = types.ModuleType("vllm")
    module.LLM = StandInLLM  # type: ignore[attr-defined]
    module.SamplingParams = lambda **kw: SimpleNamespace(**kw)  # type: ignore[attr-defined]
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = lambda prompt_token_ids: {"prompt_token_ids": prompt_token_ids}  # type: ignore[attr-defined]
    module.inputs = inputs  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", module)
    monkeypatch.setitem(sys.modules, "vllm.inputs", inputs)
    StandInLLM.made.clear()
    return StandInLLM
