"""The Ray executor tests' shared steps: a tiny model's backend and factory for the workers, one
log-prob pass planned on an executor (closed after), and the same pass run locally to compare."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from imprint.backends.registry import LoadContext, choose_backend
from imprint.executors import BackendFactory
from imprint.signals.cache import SignalCache
from imprint.signals.needs import Need
from imprint.signals.plan import run_plan

#: small batches, so a pass has several and a worker can be lost between them
TOKEN_BUDGET = 64


def tiny_factory(model_dir: Path) -> tuple[BackendFactory, Any]:
    """The factory a worker loads ``model_dir`` with, and the driver's own backend of it."""
    choice = choose_backend(str(model_dir), settings={"device": "cpu"})
    context = LoadContext(token_budget=TOKEN_BUDGET)
    return BackendFactory(choice, context), choice.load(context)


def pass_on_executor(
    executor: Any,
    backend: Any,
    texts: Sequence[str],
    cache: SignalCache,
    progress: Callable[[str, int], Callable[[int], None]],
) -> tuple[Any, Any]:
    """One log-prob pass over ``texts`` on ``executor``, which is closed however it ends;
    ``progress`` is called per label and its callback at each stored result."""
    try:
        return run_plan(
            list(texts), [Need()], {"target": backend}, cache, token_budget=TOKEN_BUDGET,
            progress=progress, executor=executor,
        )  # fmt: skip
    finally:
        executor.close()


def local_pass(backend: Any, texts: Sequence[str]) -> Any:
    """The same pass in this process, from an empty cache: the signals to compare with."""
    signals, _ = run_plan(
        list(texts), [Need()], {"target": backend}, SignalCache(None), token_budget=TOKEN_BUDGET
    )
    return signals
