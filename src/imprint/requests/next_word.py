"""Fast next-word sampling for SimMIA on a local model: one pass over x, then a token tree.

SimMIA needs, at every word position i of x, N samples of the next word given x_<i (and given
P + x_<i). The naive way calls ``generate`` once per prefix with N return sequences. Here:

1. The context (BOS, or BOS + P) is encoded once and its KV cache kept for every text.
2. Every prompt is tokenised as the naive and remote paths tokenise it: BOS + encode(P + x_<i),
   P and x_<i together (a BPE merge may cross the boundary between them). One forward pass over
   BOS + encode(P + x), reusing the context's cache for the tokens it shares with it, gives the
   next-token distribution at every word boundary where a prompt's tokens are a prefix of the
   whole text's (almost everywhere; where they are not, the few differing prompt tokens become a
   short chain in the tree below).
3. The first tokens of all N samples at all positions are drawn at once, as counts per distinct
   token (multinomial), which has the same law as N independent draws.
4. Samples whose word is not yet final (see :func:`imprint.data.words.first_word`) continue:
   each distinct partial word is one tree node; all nodes of a round go through the model in one
   forward, attending (4-D mask) to the cached context, x's first tokens and their own
   ancestors, with their true position ids. A node's count is split over its next tokens by a
   multinomial again. Rounds stop when every word is final or ``max_word_tokens`` is reached.

So the cost is one pass over x plus one short forward per round over the distinct partial words,
instead of N x (prompt + max_word_tokens) tokens per prefix. ``next_word`` requests are answered
by this per-text sampler; :mod:`.next_word_batch` (the same tree for many texts at once) is kept
for benchmarks/bench_simmia.py only: at its full setting it was slower and 23 of 564 word
distributions differed from this sampler's. The sampling law (top-k, then
temperature, word cut) equals that of the naive generate-per-prefix baseline. A word is never cut
inside a character whose UTF-8 bytes span several tokens (see :func:`first_word`).

Modes (``NextWordConfig.mode``):

- ``sample``: N samples, as above; weights are counts summing to N.
- ``exact``: the exact next-word distribution under the same law (weights are probabilities):
  every branch of the token tree is followed with its probability instead of a sampled count.
  Branches less likely than ``min_mass`` are dropped (their total is counted in
  ``unresolved_mass``), which bounds the cost; ``min_mass=0`` enumerates everything. Any
  expectation of a quantity in [0, 1] is then off by at most the dropped mass.
- ``greedy_topk``: each of the top-k first tokens, weighted by its probability, completed
  greedily. Noiseless and cheap, but not the expectation of the sampled score.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

import numpy as np

from imprint.data.words import first_word, split_words
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
MODES = ("sample", "exact", "greedy_topk")


@dataclass(frozen=True)
class NextWordConfig:
    """Sampling settings shared by the fast sampler and its naive baseline."""

    n: int = 100
    top_k: int = 50
    temperature: float = 1.0
    max_word_tokens: int = 8
    mode: str = "sample"
    min_mass: float = 1e-4  # exact mode: branches less likely than this are not expanded
    node_batch: int = 512  # tree tokens per forward

    def __post_init__(self) -> None:
        if self.n < 1 or self.max_word_tokens < 1 or self.node_batch < 1:
            raise ConfigError("n, max_word_tokens and node_batch must all be >= 1")
        if self.temperature <= 0 or self.top_k < 0:
            raise ConfigError(
                f"temperature must be > 0 and top_k >= 0, got {self.temperature}, {self.top_k}"
            )
        if self.mode not in MODES:
            raise ConfigError(f"next-word mode must be one of {MODES}, got {self.mode!r}")
        if not 0 <= self.min_mass < 1:
            raise ConfigError(f"min_mass must be in [0, 1), got {self.min_mass}")
        if self.mode == "greedy_topk" and self.top_k == 0:
            raise ConfigError(
                "greedy_topk completes each of the top-k first tokens, and top_k=0 means the "
                "whole vocabulary: set top_k (e.g. 50), or use mode='exact'"
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
    source: int  # node id whose output predicts the next token; -1 - a: after a text tokens
    visible: int
    ancestors: tuple[int, ...]
    pos: int
    greedy: bool = False  # continues with the most likely token only


@dataclass
class _Tree:
    """The whole text's forward (``hidden`` row r = position ``start + r``) and the tree."""

    cache: Any
    start: int
    hidden: Any
    rows: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)  # a -> top-k
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
        self._ctx: dict[str | None, tuple[list[int], Any]] = {}
        self.forwarded_tokens = 0  # tree + x tokens that went through the model
        self.unresolved_mass = 0.0  # exact mode: probability dropped below min_mass, summed

    @_with_torch
    def distributions(
        self, text: str, *, prefix: str | None, rng: np.random.Generator
    ) -> list[WordDist]:
        """Per word position i = 1 .. L-1 (0-based), the weights of next words given
        [prefix +] x_<i. Weights sum to ``n`` (sample), 1 (greedy_topk) or 1 less the dropped
        mass (exact)."""
        words = split_words(text)
        if len(words) < 2:
            return []
        context = prefix or ""
        full = [self.hf.bos_id, *self.hf.encode(context + text)]
        prompts = [[self.hf.bos_id, *self.hf.encode(context + text[: w.end])] for w in words[:-1]]
        tree = self._start(full, prompts, prefix)
        items = [self._root(tree, full, ids, i + 1) for i, ids in enumerate(prompts)]
        self._fill_rows(tree, {-1 - item.source for item in items if item.source < 0})
        self._forward_pending(tree)
        dists: list[WordDist] = [{} for _ in items]
        while items:
            items = self._grow(tree, items, dists, rng)
            self._forward_pending(tree)
        return dists

    # -- set-up --------------------------------------------------------------------------------
    def _context(self, prefix: str | None) -> tuple[list[int], Any]:
        """BOS [+ P] tokens and their KV cache, kept for every text with this prefix."""
        if prefix not in self._ctx:
            ids = [self.hf.bos_id, *(self.hf.encode(prefix) if prefix else [])]
            out = self._base(torch.tensor([ids]), None, None, None)
            if len(self._ctx) > 2:
                self._ctx.clear()
            self._ctx[prefix] = (ids, out.cache)
        return self._ctx[prefix]

    def _start(self, full: list[int], prompts: list[list[int]], prefix: str | None) -> _Tree:
        """Forward the whole text ``full`` after the part of the context cache it shares.

        Re-forwarding starts one token before the shortest agreement with the context or any
        prompt, so every row a prompt needs exists; cache slot j then holds full[j]."""
        ids, cache = self._context(prefix)
        shared = min(_common(ids, full), *(_common(p, full) for p in prompts))
        start = max(shared - 1, 0)
        cache = copy.deepcopy(cache)
        cache.crop(start - cache.get_seq_length())  # keep the first ``start`` entries
        pos = torch.arange(start, len(full)).unsqueeze(0)
        hidden = self._base(torch.tensor([full[start:]]), None, pos, cache).last_hidden_state[0]
        self.forwarded_tokens += len(full) - start
        return _Tree(cache, start, hidden)

    def _root(self, tree: _Tree, full: list[int], ids: list[int], word: int) -> _Item:
        """The item for word position ``word``: the samples after the prompt tokens ``ids``."""
        m = _common(ids, full)
        ancestors: tuple[int, ...] = ()
        for j, token in enumerate(ids[m:]):  # prompt tokens that differ from the text's: a chain
            tree.nodes.append(_Node(token, m + j, m, ancestors))
            ancestors = (*ancestors, len(tree.nodes) - 1)
        source = ancestors[-1] if ancestors else -1 - m  # -1 - m: the row after m text tokens
        mass = float(self.cfg.n) if self.cfg.mode == "sample" else 1.0
        return _Item(word, mass, [], source, m, ancestors, len(ids))

    def _fill_rows(self, tree: _Tree, after: set[int]) -> None:
        """Top-k next tokens after the first ``a`` text tokens, for each ``a`` in ``after``."""
        wanted = sorted(after)
        if wanted:
            rows = tree.hidden[torch.tensor(wanted) - 1 - tree.start]
            tree.rows.update(zip(wanted, self._top(rows), strict=True))

    # -- sampling --------------------------------------------------------------------------------
    def _grow(
        self,
        tree: _Tree,
        items: list[_Item],
        dists: list[WordDist],
        rng: np.random.Generator,
    ) -> list[_Item]:
        """Split every item over its next tokens; finished words go to ``dists``."""
        grown: list[_Item] = []
        for item in items:
            top_ids, probs = (
                tree.rows[-1 - item.source] if item.source < 0 else tree.top[item.source]
            )
            for token, mass, greedy in self._split(item, top_ids, probs, rng):
                word, final = self._word(item.gen, token)
                if final:
                    dists[item.word - 1][word] = dists[item.word - 1].get(word, 0.0) + mass
                    continue
                tree.nodes.append(_Node(token, item.pos, item.visible, item.ancestors))
                node_id = len(tree.nodes) - 1
                ancestors = (*item.ancestors, node_id)
                gen = [*item.gen, token]
                grown.append(
                    _Item(
                        item.word, mass, gen, node_id, item.visible, ancestors, item.pos + 1, greedy
                    )
                )
        return grown

    def _word(self, gen: list[int], token: int) -> tuple[str, bool]:
        """The first word after generating ``gen`` then ``token``, and whether it is final."""
        if token == self.eos:
            return first_word(self._decode(gen), ended=True)
        new = [*gen, token]
        return first_word(self._decode(new), ended=len(new) >= self.cfg.max_word_tokens)

    def _split(
        self, item: _Item, top_ids: np.ndarray, probs: np.ndarray, rng: np.random.Generator
    ) -> list[tuple[int, float, bool]]:
        """(next token, mass, greedy from there) triples for ``item``, by the mode."""
        if item.greedy:
            return [(int(top_ids[int(np.argmax(probs))]), item.mass, True)]
        if self.cfg.mode == "sample":
            counts = rng.multinomial(int(round(item.mass)), probs)
            return [(int(top_ids[j]), float(counts[j]), False) for j in np.flatnonzero(counts)]
        masses = item.mass * probs
        # exact: branches below min_mass are dropped before decoding (decoding every child of
        # every branch costs more than the model calls on a flat distribution)
        keep = masses >= (self.cfg.min_mass if self.cfg.mode == "exact" else 0.0)
        self.unresolved_mass += float(masses[~keep].sum())
        greedy = self.cfg.mode == "greedy_topk"
        return [(int(top_ids[j]), float(masses[j]), greedy) for j in np.flatnonzero(keep)]

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
        with self.hf.attention():  # shared K/V heads on CPU, for this call only
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
            logits = self.hf.head(hidden[start : start + chunk]).float()[:, :vocab]
            values, ids = torch.topk(logits / self.cfg.temperature, k, dim=-1)
            probs = torch.softmax(values.double(), dim=-1).cpu().numpy()
            ids_np = ids.cpu().numpy()
            out.extend((ids_np[r], probs[r] / probs[r].sum()) for r in range(len(ids_np)))
        return out


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n
