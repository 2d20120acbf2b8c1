"""Fast next-word sampling for SimMIA on a local model: one pass over x, then a token tree.

SimMIA needs, at every word position i of x, N samples of the next word given x_<i (and given
P + x_<i). The naive way calls ``generate`` once per prefix with N return sequences. Here:

1. The context (BOS, or BOS + P) is encoded once and its KV cache kept for every text.
2. One forward pass over x (after the context cache) gives the next-token distribution at every
   word boundary: x_<i is a prefix of x, so its tokens are a prefix of x's tokens wherever the
   tokenizer agrees (it almost always does; where it does not, the few differing prompt tokens
   become a short chain in the tree below).
3. The first tokens of all N samples at all positions are drawn at once, as counts per distinct
   token (multinomial), which has the same law as N independent draws.
4. Samples whose word is not yet final (see :func:`imprint.attacks.words.first_word`) continue:
   each distinct partial word is one tree node; all nodes of a round go through the model in one
   forward, attending (4-D mask) to the cached context, x's first tokens and their own
   ancestors, with their true position ids. A node's count is split over its next tokens by a
   multinomial again. Rounds stop when every word is final or ``max_word_tokens`` is reached.

So the cost is one pass over x plus one short forward per round over the distinct partial words,
instead of N x (prompt + max_word_tokens) tokens per prefix. The sampling law (top-k, then
temperature, word cut) equals that of the naive generate-per-prefix baseline.

``expected=True`` replaces sampling by the model's own top-k first-token distribution (weights =
probabilities), each first token completed greedily: a noiseless estimate of the expectation.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from imprint.attacks.words import first_word, split_words
from imprint.errors import ConfigError

if TYPE_CHECKING:
    import torch

_F = TypeVar("_F", bound=Callable[..., Any])


def _with_torch(fn: _F) -> _F:
    """Run ``fn`` without autograd, importing torch at the first call rather than at import:
    ``imprint.attacks`` (and the --param checks that use it) must load without torch."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        global torch  # the module's methods use the name torch
        import torch

        with torch.no_grad():
            return fn(*args, **kwargs)

    return cast(_F, run)


WordDist = dict[str, float]  # next word -> weight (sample count, or probability mass)


@dataclass(frozen=True)
class NextWordConfig:
    """Sampling settings shared by the fast sampler and its naive baseline."""

    n: int = 100
    top_k: int = 50
    temperature: float = 1.0
    max_word_tokens: int = 8
    expected: bool = False
    node_batch: int = 512  # tree tokens per forward

    def __post_init__(self) -> None:
        if self.n < 1 or self.max_word_tokens < 1 or self.node_batch < 1:
            raise ConfigError("n, max_word_tokens and node_batch must all be >= 1")
        if self.temperature <= 0 or self.top_k < 0:
            raise ConfigError(
                f"temperature must be > 0 and top_k >= 0, got {self.temperature}, {self.top_k}"
            )


@dataclass
class _Node:
    token: int
    pos: int  # absolute position id
    visible: int  # cache entries of context + x it may attend to
    ancestors: tuple[int, ...]  # node ids, root first
    slot: int = -1  # cache index once forwarded


@dataclass
class _Item:
    """Weight ``mass`` of samples for word position ``word``, having generated ``gen``."""

    word: int
    mass: float
    gen: list[int]
    source: int  # node id whose output predicts the next token; -1 - j: x row j
    visible: int
    ancestors: tuple[int, ...]
    pos: int


@dataclass
class _Tree:
    ctx_len: int
    cache: Any
    x_top: dict[int, tuple[np.ndarray, np.ndarray]]  # x row -> (top ids, probs)
    nodes: list[_Node] = field(default_factory=list)
    top: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


class LocalNextWordSampler:
    """Next-word distributions at every word position of a text; see the module docstring.

    ``backend`` is an :class:`imprint.backends.hf.HFLogprobBackend` (its model, tokenizer,
    BOS policy and head are reused).
    """

    def __init__(self, backend: Any, config: NextWordConfig) -> None:
        self.hf, self.cfg = backend, config
        self.eos = backend.tokenizer.eos_token_id
        self._ctx: dict[str | None, tuple[list[int], Any, torch.Tensor]] = {}
        self.forwarded_tokens = 0  # tree + x tokens that went through the model

    @_with_torch
    def distributions(
        self, text: str, *, prefix: str | None, rng: np.random.Generator
    ) -> list[WordDist]:
        """Per word position i = 1 .. L-1 (0-based), the weights of next words given
        [prefix +] x_<i. Weights sum to ``n`` (sampling) or 1 (``expected``)."""
        words = split_words(text)
        if len(words) < 2:
            return []
        x = self.hf.encode(text)
        tree = self._start(x, prefix)
        items = [self._root(tree, x, text[: w.end], i + 1) for i, w in enumerate(words[:-1])]
        self._forward_pending(tree)
        dists: list[WordDist] = [{} for _ in items]
        depth = 0
        while items:
            items = self._grow(tree, items, dists, rng, depth)
            self._forward_pending(tree)
            depth += 1
        return dists

    # -- set-up --------------------------------------------------------------------------------
    def _context(self, prefix: str | None) -> tuple[list[int], Any, torch.Tensor]:
        if prefix not in self._ctx:
            ids = [self.hf.bos_id, *(self.hf.encode(prefix) if prefix else [])]
            out = self._base(torch.tensor([ids]), None, None, None)
            if len(self._ctx) > 2:
                self._ctx.clear()
            self._ctx[prefix] = (ids, out.cache, out.last_hidden_state[0, -1:])
        return self._ctx[prefix]

    def _start(self, x: list[int], prefix: str | None) -> _Tree:
        ids, cache, last = self._context(prefix)
        cache = copy.deepcopy(cache)
        ctx_len = len(ids)
        pos = torch.arange(ctx_len, ctx_len + len(x)).unsqueeze(0)
        hidden = self._base(torch.tensor([x]), None, pos, cache).last_hidden_state[0]
        self.forwarded_tokens += len(x)
        rows = torch.cat([last, hidden])  # row j predicts x token j (row 0: the context's last)
        tops = self._top(rows)
        return _Tree(ctx_len, cache, {j: t for j, t in enumerate(tops)})

    def _root(self, tree: _Tree, x: list[int], prompt: str, word: int) -> _Item:
        """The item for word position ``word``: N samples at the end of the prompt x_<word."""
        ids = self.hf.encode(prompt)
        m = 0
        while m < min(len(ids), len(x)) and ids[m] == x[m]:
            m += 1
        ancestors: tuple[int, ...] = ()
        for j, token in enumerate(ids[m:]):  # prompt tokens that differ from x's: a chain
            node = _Node(token, tree.ctx_len + m + j, tree.ctx_len + m, ancestors)
            tree.nodes.append(node)
            ancestors = (*ancestors, len(tree.nodes) - 1)
        source = ancestors[-1] if ancestors else -1 - m
        mass = 1.0 if self.cfg.expected else float(self.cfg.n)
        return _Item(word, mass, [], source, tree.ctx_len + m, ancestors, tree.ctx_len + len(ids))

    # -- sampling --------------------------------------------------------------------------------
    def _grow(
        self,
        tree: _Tree,
        items: list[_Item],
        dists: list[WordDist],
        rng: np.random.Generator,
        depth: int,
    ) -> list[_Item]:
        """Split every item over its next tokens; finished words go to ``dists``."""
        grown: list[_Item] = []
        for item in items:
            top_ids, probs = (
                tree.x_top[-1 - item.source] if item.source < 0 else tree.top[item.source]
            )
            for token, mass in self._split(item.mass, top_ids, probs, rng, depth):
                gen = [*item.gen, token]
                if token == self.eos:
                    word, final = first_word(self._decode(item.gen), ended=True)
                else:
                    ended = len(gen) >= self.cfg.max_word_tokens
                    word, final = first_word(self._decode(gen), ended=ended)
                if final:
                    dists[item.word - 1][word] = dists[item.word - 1].get(word, 0.0) + mass
                    continue
                tree.nodes.append(_Node(token, item.pos, item.visible, item.ancestors))
                node_id = len(tree.nodes) - 1
                ancestors = (*item.ancestors, node_id)
                grown.append(
                    _Item(item.word, mass, gen, node_id, item.visible, ancestors, item.pos + 1)
                )
        return grown

    def _split(
        self,
        mass: float,
        top_ids: np.ndarray,
        probs: np.ndarray,
        rng: np.random.Generator,
        depth: int,
    ) -> list[tuple[int, float]]:
        """(next token, mass) pairs: multinomial counts, or probabilities / greedy (expected)."""
        if self.cfg.expected:
            if depth == 0:
                return [(int(t), mass * float(p)) for t, p in zip(top_ids, probs, strict=True)]
            return [(int(top_ids[int(np.argmax(probs))]), mass)]
        counts = rng.multinomial(int(round(mass)), probs)
        return [(int(top_ids[j]), float(c)) for j, c in enumerate(counts) if c > 0]

    def _decode(self, ids: Sequence[int]) -> str:
        return str(self.hf.tokenizer.decode(list(ids), skip_special_tokens=True))

    # -- model calls -----------------------------------------------------------------------------
    def _forward_pending(self, tree: _Tree) -> None:
        """Forward every node without a cache slot, ``node_batch`` at a time (parents first)."""
        pending = [i for i, node in enumerate(tree.nodes) if node.slot < 0]
        for start in range(0, len(pending), self.cfg.node_batch):
            chunk = pending[start : start + self.cfg.node_batch]
            base = tree.cache.get_seq_length()
            for r, i in enumerate(chunk):
                tree.nodes[i].slot = base + r
            mask = torch.zeros((1, 1, len(chunk), base + len(chunk)), dtype=torch.bool)
            for r, i in enumerate(chunk):
                node = tree.nodes[i]
                mask[0, 0, r, : node.visible] = True
                for a in (*node.ancestors, i):
                    mask[0, 0, r, tree.nodes[a].slot] = True
            ids = torch.tensor([[tree.nodes[i].token for i in chunk]])
            pos = torch.tensor([[tree.nodes[i].pos for i in chunk]])
            hidden = self._base(ids, mask, pos, tree.cache).last_hidden_state[0]
            self.forwarded_tokens += len(chunk)
            for i, top in zip(chunk, self._top(hidden), strict=True):
                tree.top[i] = top

    def _base(self, ids: torch.Tensor, mask: Any, pos: Any, cache: Any) -> Any:
        base = getattr(self.hf.model, self.hf.model.base_model_prefix)
        device = self.hf.device
        return base(
            input_ids=ids.to(device),
            attention_mask=None if mask is None else mask.to(device),
            position_ids=None if pos is None else pos.to(device),
            cache=cache,
            use_cache=True,
        )

    def _top(self, hidden: torch.Tensor, chunk: int = 256) -> list[tuple[np.ndarray, np.ndarray]]:
        """Top-k token ids and their renormalised probabilities at temperature, per row."""
        vocab = int(self.hf.model.config.vocab_size)
        k = min(self.cfg.top_k or vocab, vocab)
        out: list[tuple[np.ndarray, np.ndarray]] = []
        for start in range(0, hidden.shape[0], chunk):
            logits = self.hf._head(hidden[start : start + chunk]).float()[:, :vocab]
            values, ids = torch.topk(logits / self.cfg.temperature, k, dim=-1)
            probs = torch.softmax(values.double(), dim=-1).cpu().numpy()
            ids_np = ids.cpu().numpy()
            out.extend((ids_np[r], probs[r] / probs[r].sum()) for r in range(len(ids_np)))
        return out
