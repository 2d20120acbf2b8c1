"""DE-COP (Duarte et al. 2024): does the model pick the verbatim passage out of its paraphrases?

Each text x is shown with three paraphrases of it as the options A-D of a multiple-choice
question ("which passage is quoted verbatim?"), once for every ordering of the four options
(4! = 24, or a seeded subset of ``n_orderings`` shared by all texts). How the model's answer
is decided (``decision``; ``auto`` picks by the target, the run records the rule it used as
``decision_rule`` in the manifest):

- ``letter_logits`` (local models, the authors' rule for open models in ``2_decop_hf.py``): one
  forward pass over the question, no generation; the answer is the letter of highest next-token
  probability among A-D (:mod:`imprint.requests.letter_choice`), so every question is answered;
- ``parse`` (text-only targets: vLLM, OpenAI-compatible completions or chat, the question sent
  as it is): a greedy answer parsed to a letter (:func:`parse_choice`), which can name none.

With ``picked`` the orderings answered with x's letter, ``parsed`` those answered with any letter
and ``asked`` all of them:

    de_cop(x)        = picked / asked    (the paper's accuracy: a non-answer is a wrong answer)
    de_cop_parsed(x) = picked / parsed   (NaN when no answer named a letter)

(equal under ``letter_logits``, where parsed = asked). A model that saw x recognises it more
often (higher = member). Answers that name no letter are counted: every score call logs how
many, and ``de_cop_parsed`` leaves a text with none unscored (the run counts it). A text whose
paraphrases are missing, empty or equal to x (after whitespace is collapsed) cannot make a
question: both columns are NaN, counted and logged.

Paraphrases come from ``paraphrase_fields`` (one data field holding a list of three texts, or
three fields of one text each), else from the ``paraphraser`` model (``"target"`` or a model
spec), asked greedily with three different rewriting instructions (``paraphrase`` requests,
stored and counted). The paper paraphrased with Claude 2 and asked the target with the options
shown as written; here every option's whitespace is collapsed the same way, so layout cannot
tell the verbatim one apart. The prompt follows the paper's structure (an exam instruction, the
question, the lettered options, "Answer:"), in this project's words; ``source_field`` names a
data field holding the work's title, as the paper's question names the book.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import permutations
from typing import Any, Literal

import numpy as np

from imprint.attacks.base import Preparation, RunContext, prepared_field, register
from imprint.attacks.model_calls import ModelCallAttack
from imprint.backends.base import SAMPLING, Access, Backend
from imprint.data.sample import Sample
from imprint.data.words import split_units
from imprint.errors import CapabilityError, ConfigError, DataError
from imprint.requests.client import ModelRequests
from imprint.requests.kinds import ParaphraseRequest
from imprint.requests.plan import AttackCalls

log = logging.getLogger(__name__)

LETTERS = "ABCD"
Decision = Literal["auto", "letter_logits", "parse"]
DECISIONS = ("auto", "letter_logits", "parse")
ORDERINGS: tuple[tuple[int, ...], ...] = tuple(permutations(range(4)))  # option 0 = verbatim
INSTRUCTION = (
    "You are taking a multiple-choice exam. Answer the question by choosing one option. Reply "
    "with the letter of that option only, without any explanation."
)
PARAPHRASE_PROMPTS = (
    "Rewrite the passage below in your own words. Keep its meaning, its language and about its "
    "length, but change the wording. Reply with the rewritten passage only.\n\n"
    "Passage: {text}\n\nRewritten passage:",
    "Restate the passage below with a different sentence structure and different word choices, "
    "in the same language and with the same meaning. Reply with the restated passage only.\n\n"
    "Passage: {text}\n\nRestated passage:",
    "Paraphrase the passage below, replacing as many words as you can with synonyms while "
    "keeping its meaning and its language. Reply with the paraphrase only.\n\n"
    "Passage: {text}\n\nParaphrase:",
)
_LEAD_IN = re.compile(
    r"^(?:(?:the\s+)?(?:correct\s+|right\s+|best\s+)?(?:answer|option|choice)"
    r"(?:\s+(?:is|would\s+be))?\s*[:\-]?\s*)",
    re.IGNORECASE,
)
_LEADING = re.compile(r"^[(\[]?([A-D])(?:[).:\],;]|\s*$|\s+(?:is|was)\b|\s*\n)")
_ALONE_LOWER = re.compile(r"^[(\[]?([a-d])[).\]]?$")
_NAMED = re.compile(r"(?i:answer|option|choice)\s*(?i:is)?\s*[:\-]?\s*[(\[]?([A-D])(?![A-Za-z])")
_BRACKETED = re.compile(r"[(\[]([A-D])[)\]]")
_QUOTE_CHARS = "\"'“”‘’«»「」『』"
MIN_QUOTED = 20  # characters of an option an answer must repeat to name it by its text


def display(text: str) -> str:
    """An option as shown: every whitespace run one space, stripped (applied to all four options
    alike, so layout never gives the verbatim one away; characters are kept as written)."""
    return " ".join(text.split())


def clean_paraphrase(answer: str, text: str) -> str:
    """A generated paraphrase without the wrapping models add: a first line that only announces
    it ("Here is the rewritten passage:"), surrounding quotes, and, when the text itself has no
    blank line, whatever follows the first blank line (a base model writing on)."""
    answer = answer.strip()
    first, _, rest = answer.partition("\n")
    if first.rstrip().endswith(":") and rest.strip():
        answer = rest.strip()
    if "\n\n" not in text.strip():
        answer = answer.split("\n\n", 1)[0]
    return answer.strip().strip(_QUOTE_CHARS).strip()


def question_prompt(options: Sequence[str], source: str | None = None) -> str:
    """The multiple-choice prompt for four options (already in display form), in order A-D."""
    if len(options) != len(LETTERS):
        raise ConfigError(f"a DE-COP question has {len(LETTERS)} options, got {len(options)}")
    where = f"from {source}" if source else "from its original source"
    lines = [
        INSTRUCTION,
        "",
        f"Question: Which of the following passages is quoted verbatim {where}?",
        "Options:",
        *(f"{letter}. {text}" for letter, text in zip(LETTERS, options, strict=True)),
        "Answer:",
    ]
    return "\n".join(lines)


def parse_choice(answer: str, options: Sequence[str] = ()) -> int | None:
    """The option (0-3 for A-D) an answer names, or None when it names none or several.

    Tried in order, the first rule that finds anything decides (two different letters: None):
    a leading letter ("B", "(C)", "D.", "**A**", "Answer: B", "The answer is C", "A is ...",
    lower case only alone: "b"), a letter named anywhere ("option D", "answer: (B)", "(C)"),
    or the answer repeating the start of exactly one option's text (``options``, at least
    ``MIN_QUOTED`` characters or the whole option)."""
    text = unicodedata.normalize("NFKC", answer).replace("*", "").strip().strip(_QUOTE_CHARS)
    text = _LEAD_IN.sub("", text, count=1).strip()
    rules = (
        lambda: [m.group(1) for m in (_LEADING.match(text), _ALONE_LOWER.match(text)) if m],
        lambda: _NAMED.findall(text) or _BRACKETED.findall(text),
    )
    for rule in rules:
        found = {letter.upper() for letter in rule()}
        if found:
            return LETTERS.index(found.pop()) if len(found) == 1 else None
    return _quoted_option(text, options)


def _folded(text: str) -> str:
    return display(unicodedata.normalize("NFKC", text)).casefold()


def _quoted_option(text: str, options: Sequence[str]) -> int | None:
    said = _folded(text)
    hits = set()
    for i, option in enumerate(options):
        shown = _folded(option)
        head = shown[: max(MIN_QUOTED, 1)]
        if shown and (said.startswith(head) or (len(shown) < MIN_QUOTED and said == shown)):
            hits.add(i)
    return hits.pop() if len(hits) == 1 else None


def decop_scores(choices: Sequence[int | None], verbatim_at: Sequence[int]) -> tuple[float, float]:
    """(de_cop, de_cop_parsed) of one text: ``choices[k]`` is the parsed answer to ordering k
    (None: no letter), ``verbatim_at[k]`` the position of the verbatim passage in it."""
    if len(choices) != len(verbatim_at) or not choices:
        raise ConfigError("DE-COP needs one parsed answer per ordering asked, at least one")
    picked = sum(c == v for c, v in zip(choices, verbatim_at, strict=True))
    parsed = sum(c is not None for c in choices)
    return picked / len(choices), (picked / parsed if parsed else float("nan"))


def letter_choice(letter_logp: Sequence[float]) -> int:
    """The option (0-3 for A-D) of highest letter log-probability: the authors' argmax over the
    letters' softmax (ties: the first, as ``torch.argmax``); never None."""
    return int(np.argmax(np.asarray(letter_logp, np.float64)))


def usable_paraphrases(text: str, paraphrases: Sequence[str]) -> tuple[str, ...] | None:
    """The three paraphrases in display form, or None when one is empty or equals the text."""
    verbatim = display(text)
    shown = tuple(display(p.strip().strip(_QUOTE_CHARS)) for p in paraphrases[:3])
    if len(shown) < 3 or not verbatim or any(not p or p == verbatim for p in shown):
        return None
    return shown


@register("de_cop")
@dataclass(frozen=True)
class DECOP(ModelCallAttack):
    n_orderings: int = 24
    paraphrase_fields: tuple[str, ...] = ()
    paraphraser: str = "target"
    source_field: str = ""
    answer_max_tokens: int = 8
    paraphrase_max_tokens: int = 0  # 0 = 3 tokens per unit of the text, at least 16, at most 512
    seed: int = 0
    decision: Decision = "auto"  # auto: letter_logits for a local model, parse for a text-only one
    # text -> (3 paraphrases, source title or None), read from the data by prepare()
    given: dict[str, tuple[tuple[str, ...] | None, str | None]] | None = prepared_field()
    # the rule ``auto`` resolved to for this run's target (written to the manifest)
    decision_rule: str | None = prepared_field(record=True)

    summary = (
        "multiple choice between the verbatim text and 3 paraphrases over all 24 orderings: "
        "fraction answered with the verbatim"
    )
    paper = (
        "Duarte et al. 2024, DE-COP: Detecting Copyrighted Content in Language Models Training "
        "Data (ICML 2024, arXiv 2402.09910)"
    )
    access = Access.BLACK_BOX
    deviations = (
        "decision=letter_logits reads the letters at the first position after the question "
        "(the chat template applied where the tokenizer has one), each letter's probability "
        "summed over its bare and space-prefixed single tokens ('A', ' A'); the authors read "
        "one spelling (the last id of tokenizer('A')) at the second generated step (the third "
        "for LLaMA2-7B), after the greedy tokens their LLaMA-2 chat template leads in with.",
        "decision=parse (text-only targets) parses a generated answer and counts one naming no "
        "letter as wrong; the authors' API path forces a letter instead (GPT-3.5: a +100 logit "
        "bias on A-D and one token's top log-probs; Claude: one token).",
        "The question is worded in this project's words with the paper's structure (an exam "
        "instruction, the question naming the work, options A-D, 'Answer:'), every option's "
        "whitespace collapsed alike; paraphrases come from the data or the paraphraser model "
        "(the authors used Claude 2's), and the paper's letter-bias calibration is not applied.",
    )

    def __post_init__(self) -> None:
        if not 1 <= self.n_orderings <= len(ORDERINGS):
            raise ConfigError(
                f"de_cop n_orderings must be in 1..{len(ORDERINGS)} (the orderings of 4 "
                f"options), got {self.n_orderings}"
            )
        if len(self.paraphrase_fields) not in (0, 1, 3):
            raise ConfigError(
                "de_cop paraphrase_fields names one field holding a list of 3 paraphrases or 3 "
                f"fields of one paraphrase each; got {self.paraphrase_fields}"
            )
        if self.answer_max_tokens < 1 or self.paraphrase_max_tokens < 0 or not self.paraphraser:
            raise ConfigError(
                "de_cop needs answer_max_tokens >= 1, paraphrase_max_tokens >= 0 (0 = sized to "
                "the text) and a paraphraser ('target' or a model spec); got "
                f"{self.answer_max_tokens}, {self.paraphrase_max_tokens}, {self.paraphraser!r}"
            )
        if self.decision not in DECISIONS:
            raise ConfigError(
                f"de_cop decision must be one of {DECISIONS} (letter_logits: argmax of the A-D "
                f"next-token probabilities, local models; parse: a generated answer parsed to a "
                f"letter), got {self.decision!r}"
            )

    def columns(self) -> tuple[str, ...]:
        return ("de_cop", "de_cop_parsed")

    def check_backend(self, backend: Backend) -> None:
        """Raise CapabilityError before any work when ``backend`` cannot generate text."""
        if not backend.supports(SAMPLING):
            raise CapabilityError(f"de_cop needs text generation; {backend!r} cannot sample")
        backend.text_backend()
        if self.decision == "letter_logits" and backend.local_model() is None:
            raise CapabilityError(
                f"de_cop decision='letter_logits' reads the option letters' next-token "
                f"probabilities of a local model; {backend!r} returns text only: use "
                "--param de_cop.decision=parse (or auto)"
            )

    def rule(self, requests: ModelRequests | None) -> str:
        """The decision rule for this target: the prepared one, else ``decision`` with ``auto``
        resolved (letter_logits when the target is a local model with logits, else parse)."""
        if self.decision_rule:
            return self.decision_rule
        if self.decision != "auto":
            return self.decision
        has_logits = requests is not None and requests.local("target") is not None
        return "letter_logits" if has_logits else "parse"

    def orderings(self) -> tuple[tuple[int, ...], ...]:
        """The orderings asked (option 0 = verbatim): all 24, or a seeded subset in order."""
        if self.n_orderings == len(ORDERINGS):
            return ORDERINGS
        rng = np.random.default_rng(self.seed)
        chosen = sorted(rng.choice(len(ORDERINGS), self.n_orderings, replace=False))
        return tuple(ORDERINGS[int(i)] for i in chosen)

    def prepare(self, samples: Sequence[Sample], run: RunContext) -> Preparation:
        """Resolve the decision rule for the run's target (recorded in the manifest); read the
        paraphrases (``paraphrase_fields``) and titles (``source_field``) from the data; a
        sample lacking a named field fails here, naming it."""
        requests = run.requests if run is not None else None  # None: a library call
        rule = self.rule(requests) if requests is not None else None
        if not self.paraphrase_fields and not self.source_field:
            return Preparation(attack=replace(self, decision_rule=rule) if rule else None)
        given = {s.text: (self._given_paraphrases(s), self._source(s)) for s in samples}
        return Preparation(attack=replace(self, given=given, decision_rule=rule))

    def _given_paraphrases(self, sample: Sample) -> tuple[str, ...] | None:
        fields = self.paraphrase_fields
        if not fields:
            return None
        missing = [f for f in fields if f not in sample.meta]
        if missing:
            raise DataError(
                f"de_cop: sample {sample.id!r} has no field {missing[0]!r} (paraphrase_fields="
                f"{','.join(fields)}); its fields are {sorted(sample.meta)}"
            )
        values = [sample.meta[f] for f in fields]
        found = values[0] if len(fields) == 1 else values
        if isinstance(found, str) or not all(isinstance(v, str) for v in found):
            raise DataError(
                f"de_cop: sample {sample.id!r}: paraphrase_fields must give 3 texts (one field "
                f"holding a list of 3 strings, or 3 string fields); got {found!r}"
            )
        return tuple(found)

    def _source(self, sample: Sample) -> str | None:
        if not self.source_field:
            return None
        value = sample.meta.get(self.source_field)
        return (str(value).strip() or None) if value is not None else None

    def score_with_requests(
        self,
        requests: ModelRequests,
        texts: Sequence[str],
        *,
        paraphrases: Sequence[Sequence[str]] | None = None,
        **kwargs: Any,
    ) -> dict[str, np.ndarray]:
        """Columns ``de_cop``, ``de_cop_parsed``, each of shape (len(texts),), higher = member.
        ``paraphrases`` (library use) gives each text's three paraphrases directly."""
        options = self._paraphrases(requests, texts, paraphrases)
        questions: list[tuple[int, int, tuple[str, ...]]] = []  # (text, verbatim at, options)
        for i, shown in enumerate(options):
            if shown is not None:
                four = (display(texts[i]), *shown)
                for order in self.orderings():
                    questions.append((i, order.index(0), tuple(four[k] for k in order)))
        prompts = [question_prompt(q[2], self._source_of(texts[q[0]])) for q in questions]
        picks = self._answers(requests, prompts, [q[2] for q in questions])
        choices: dict[int, list[int | None]] = {}
        verbatim: dict[int, list[int]] = {}
        for (i, at, _), pick in zip(questions, picks, strict=True):
            choices.setdefault(i, []).append(pick)
            verbatim.setdefault(i, []).append(at)
        out = {c: np.full(len(texts), np.nan) for c in self.columns()}
        for i in choices:
            out["de_cop"][i], out["de_cop_parsed"][i] = decop_scores(choices[i], verbatim[i])
        self._report(options, choices)
        return out

    def _answers(
        self, requests: ModelRequests, prompts: list[str], options: list[tuple[str, ...]]
    ) -> list[int | None]:
        """The option each question's answer names (None: none), by the run's decision rule."""
        rule = self.rule(requests)
        if rule == "parse":
            answers = requests.choices("target", prompts, max_tokens=self.answer_max_tokens)
            return [parse_choice(a, o) for a, o in zip(answers, options, strict=True)]
        if requests.local("target") is None:
            raise CapabilityError(
                "de_cop decision='letter_logits' needs a local target model with logits; use "
                "--param de_cop.decision=parse for a text-only target"
            )
        found = requests.letter_logprobs("target", prompts, letters=LETTERS)
        if found:
            log.info(
                "de_cop: %d questions answered by the letter-logit rule; the letters A-D held "
                "%.1f %% of the next-token probability on average",
                len(found),
                100 * float(np.mean([r["mass"] for r in found])),
            )
        return [letter_choice(r["logp"]) for r in found]

    def _report(
        self, options: list[tuple[str, ...] | None], choices: dict[int, list[int | None]]
    ) -> None:
        """Log what was not scored: answers naming no option, texts with no question."""
        unparsed = sum(c is None for cs in choices.values() for c in cs)
        asked = sum(len(cs) for cs in choices.values())
        none = sum(1 for cs in choices.values() if all(c is None for c in cs))
        if unparsed:
            log.warning(
                "de_cop: %d of %d answers (%.1f %%) named no option A-D; they count as wrong in "
                "de_cop and are left out of de_cop_parsed (%d texts had no parsable answer)",
                unparsed,
                asked,
                100 * unparsed / asked,
                none,
            )
        bad = sum(o is None for o in options)
        if bad:
            log.warning(
                "de_cop: %d of %d texts had a missing, empty or verbatim paraphrase and were not "
                "asked (score NaN)",
                bad,
                len(options),
            )

    def _source_of(self, text: str) -> str | None:
        return self.given.get(text, (None, None))[1] if self.given else None

    def _paraphrases(
        self,
        requests: ModelRequests,
        texts: Sequence[str],
        supplied: Sequence[Sequence[str]] | None,
    ) -> list[tuple[str, ...] | None]:
        """Each text's three paraphrases in display form (None: unusable), from ``supplied``,
        the data (prepare) or the paraphraser model."""
        if supplied is not None:
            if len(supplied) != len(texts):
                raise ConfigError(
                    f"de_cop: {len(supplied)} paraphrase lists for {len(texts)} texts"
                )
            return [usable_paraphrases(t, p) for t, p in zip(texts, supplied, strict=True)]
        if self.paraphrase_fields:
            given = self.given or {}
            if any(t not in given for t in texts):
                raise ConfigError(
                    "de_cop with paraphrase_fields reads them in prepare(); for library use "
                    "pass paraphrases=... to score_with_backend"
                )
            return [usable_paraphrases(t, given[t][0] or ()) for t in texts]
        return self._generated(requests, texts)

    def _generated(
        self, requests: ModelRequests, texts: Sequence[str]
    ) -> list[tuple[str, ...] | None]:
        role = "target" if self.paraphraser == "target" else "paraphraser"
        if role == "paraphraser":
            requests.load(role, self.paraphraser)
        out: list[tuple[str, ...] | None] = []
        by_budget: dict[int, list[int]] = {}
        for i, text in enumerate(texts):
            by_budget.setdefault(self._paraphrase_budget(text), []).append(i)
        found: dict[int, list[str]] = {}
        for budget, idx in sorted(by_budget.items()):
            prompts = [p.format(text=texts[i]) for i in idx for p in PARAPHRASE_PROMPTS]
            answers = requests.paraphrases(role, prompts, max_tokens=budget)
            for j, i in enumerate(idx):
                found[i] = [clean_paraphrase(a, texts[i]) for a in answers[3 * j : 3 * j + 3]]
        for i, text in enumerate(texts):
            out.append(usable_paraphrases(text, found[i]))
        return out

    def planned_requests(self, texts: Sequence[str], *, target_local: bool = True) -> AttackCalls:
        """Three paraphrase requests per text (none when the data gives the paraphrases); the
        questions, one per ordering of each text whose paraphrases are usable, are known after
        them (estimated for an HTTP target at every text's)."""
        asks = "letter_logprobs" if self.rule(None) == "letter_logits" else "multiple_choice"
        uncounted = (f"{asks} (asked of the texts with usable paraphrases)",)
        estimated = {"target": len(texts) * self.n_orderings}
        if self.paraphrase_fields:  # read from the data: no paraphrase calls
            return AttackCalls(uncounted=uncounted, estimated=estimated)
        role = "target" if self.paraphraser == "target" else "paraphraser"
        out = [
            (role, ParaphraseRequest(prompt=p.format(text=t),
                                     max_tokens=self._paraphrase_budget(t)))
            for t in texts
            for p in PARAPHRASE_PROMPTS
        ]  # fmt: skip
        return AttackCalls.of(out, uncounted=uncounted, estimated=estimated)

    def _paraphrase_budget(self, text: str) -> int:
        if self.paraphrase_max_tokens:
            return self.paraphrase_max_tokens
        return min(512, max(16, 3 * len(split_units(text))))
