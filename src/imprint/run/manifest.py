"""The run's manifest: config, data accounting, models, attacks and the work done."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from imprint.attacks import hyperparameters

if TYPE_CHECKING:
    from imprint.run.inputs import RunInputs
    from imprint.run.plan import RunPlan
    from imprint.run.score import Scored


def run_manifest(
    plan: RunPlan, inputs: RunInputs, scored: Scored, started: float
) -> dict[str, Any]:
    """The manifest (``manifest.json``) of a run scored as ``scored``."""
    loaded = inputs.loaded
    manifest = {
        "config": plan.config,
        "data": {
            "source": loaded.source,
            "fingerprint": loaded.fingerprint,
            "loaded": len(loaded.samples),
            "evaluated": len(scored.samples),
            "dropped": inputs.dropped,
            # the rows the loader dropped, by reason (the report lists them; other drops are
            # counted only, or their ids kept where they happen, e.g. models.target.ambiguous)
            "dropped_ids": loaded.dropped_ids,
            "defects": inputs.defects.to_dict(),
        },
        "models": scored.models,
        "attacks": {a.name: hyperparameters(a) for a in scored.attacks},
        "attack_deviations": {a.name: list(a.deviations) for a in scored.attacks if a.deviations},
        "requests": scored.work.to_dict(),
        "executor": scored.work.executor,
        "elapsed_s": round(time.time() - started, 2),
    }
    if scored.plan is not None:  # what the plan line said before the work, and what it took
        manifest["plan"] = {
            **scored.plan.to_dict(),
            "scoring_s": round(scored.scoring_s, 2),
            # seconds each "role kind" took as run (its counts: the manifest's "requests")
            "seconds": {f"{r} {k}": round(s, 3) for (r, k), s in scored.call_seconds.items()},
        }
    if inputs.references is not None:
        manifest["references"] = inputs.references
    if inputs.shots is not None:  # one evaluation set: the shots every attack leaves out
        manifest["shots"] = inputs.shots.to_dict()
    return manifest


def unmatched_message(record: dict[str, Any]) -> str:
    """The report warning for training-manifest ids that match no sample of the run."""
    shown = ", ".join(record["unmatched_examples"])
    more = " ..." if record["unmatched_ids"] > len(record["unmatched_examples"]) else ""
    return (
        f"{record['unmatched_ids']} sample id(s) of the training manifest {record['source']} "
        f"match no sample of this run ({shown}{more}); accepted by --allow-unmatched-ids, they "
        "play no part in the membership"
    )
