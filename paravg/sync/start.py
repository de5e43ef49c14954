"""The start model of one train job, for any sync method (the torch side of the registry).

``form_start_model`` is what every train job runs first: iteration 0 reads ``0.pt``;
later iterations call the start function the method's registry entry names
(``SyncMethod.start``) with the files its ``start_inputs`` named, by role. Forming the
start inside the job keeps one node per job on the critical path of an iteration. A
method with a mix node (delay-by-one) has it formed there, by the same function, and the
job reads the node's file (role ``mixed_start``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path

from paravg.sync.registry import get_method


def form_start_model(
    method: str, inputs: Mapping[str, Sequence[str | Path]], iteration: int, sync_cfg: dict
) -> tuple[dict, dict]:
    """(start model file dict, record of how it was formed) of a job of ``iteration``."""
    if "initial" in inputs:
        from paravg.nnet.model_file import load_model_file

        path = inputs["initial"][0]
        return load_model_file(path), {"initial": str(path)}
    if "synced" in inputs:  # the node's copy of the start: a rewound run, or a large N
        from paravg.io import read_json
        from paravg.nnet.model_file import load_model_file

        path, summary = inputs["synced"][0], read_json(inputs["summary"][0])
        summary.pop("sha256", None)
        return load_model_file(path), {**summary, "synced": str(path)}
    if "mixed_start" in inputs:  # written by the job's mix node (SyncMethod.mix_node)
        from paravg.nnet.model_file import load_model_file

        path = inputs["mixed_start"][0]
        start = load_model_file(path)
        return start, {**(start.get("meta") or {}).get("start", {}), "mix_node": str(path)}
    module, function = get_method(method).start.split(":")
    start = getattr(importlib.import_module(module), function)
    return start({k: list(v) for k, v in inputs.items()}, iteration, sync_cfg)
