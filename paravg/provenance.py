"""Checksums of model files, and the way out of a damaged one (torch-free).

Every rule that writes a model file records its sha256 in the JSON it writes beside it
(``init.json``, ``<t>/job<j>.json``, ``sync/<t>.json``, ``consensus/<t>.json``,
``combine.json``, ``final.json``: key ``sha256``, by the file's path relative to the
experiment dir; :func:`paravg.layout.model_producer` knows which JSON). Every reader
(:func:`paravg.nnet.model_file.load_model_file`) compares the bytes it read with that record,
so a file damaged after it was written (a truncated copy, a bad disk, an edit) is caught
even when it still unpickles, and is never trained or averaged from.

A damaged file is never silently rebuilt: the reader stops with a
:class:`~paravg.errors.ModelFileError` that names the file, what is wrong, the rule that
wrote it and the two commands that rebuild exactly it (delete it, ask for it). Files of
finished iterations are the DAG's inputs (:mod:`paravg.resume`), so a deleted model moves
the experiment's frontier back to it: its sync node reruns from the jobs' models, or,
when those are gone (``run.keep_job_models: false``), that iteration's jobs retrain from
the model before it — reproducing the file bit for bit on CPU.

The records also carry the plan that made them (``plan.fingerprint``):
:func:`check_input_fingerprints` is the check every job, sync node and mix node makes on
the records of its inputs before it reads them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os

from paravg.errors import ModelFileError, TrainingError
from paravg.io import read_json
from paravg.layout import model_producer

log = logging.getLogger(__name__)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def checksums(written: dict) -> dict[str, str]:
    """``{path: sha256}`` of files a rule wrote -> the ``sha256`` entry of its JSON."""
    out = {}
    for path, digest in written.items():
        producer = model_producer(path)
        out[producer.key if producer else os.path.basename(str(path))] = digest
    return out


def recorded_sha256(path) -> str | None:
    """The sha256 the producer of ``path`` recorded, None when it recorded none."""
    producer = model_producer(path)
    if producer is None or producer.record is None:
        return None
    try:
        with open(producer.record) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    sums = record.get("sha256") if isinstance(record, dict) else None
    return sums.get(producer.key) if isinstance(sums, dict) else None


def check_recorded(path, data: bytes) -> None:
    """Raise a :func:`damaged` error if ``data`` (the bytes of ``path``) differ from what
    its producer recorded."""
    expected = recorded_sha256(path)
    if expected is not None and sha256_hex(data) != expected:
        producer = model_producer(path)
        raise damaged(
            path,
            f"its bytes differ from what rule {producer.rule} recorded when it wrote it "
            f"(sha256 {expected[:12]}… in {producer.record}): the file changed after it "
            "was written",
        )


def damaged(path, what: str) -> ModelFileError:
    """The error for a damaged model file: what is wrong, who wrote it, how to rebuild it."""
    producer = model_producer(path)
    lines = [f"{path}: {what}."]
    if producer is not None:
        lines += [
            f"It was written by rule {producer.rule}. Rebuild exactly this file (and nothing "
            "else) with your usual snakemake options, then run your command again:",
            f"    rm {path}",
            f"    snakemake <your options: --profile/--cores, --configfile ...> {path}",
            "(If the job models it was made from are gone, run.keep_job_models: false, that "
            "iteration's jobs retrain from the model before it: the same bits on CPU.)",
        ]
    return ModelFileError("\n".join(lines))


def check_input_fingerprints(stats_paths, expected: str, unrecorded_ok: bool = False) -> None:
    """Every job output a start model is formed from must come from the current plan
    (each statistics file's, or a sync node summary's, ``plan.fingerprint``).
    ``unrecorded_ok``: a file without a plan record is let through with a warning (the
    node summaries of an older paravg, which recorded none).

    The DAG starts at the newest finished iteration (:mod:`paravg.resume`), so the
    history is not re-checked by Snakemake; a job whose inputs were made with another
    plan (e.g. the egs were rebuilt in this run) stops instead of mixing two configs.
    """
    for path in stats_paths:
        record = read_json(path).get("plan")
        if record is None and unrecorded_ok:
            log.warning("%s records no plan (an older paravg wrote it): not checked", path)
            continue
        got = (record or {}).get("fingerprint")
        if got != expected:
            raise TrainingError(
                f"{path} was made by another plan (fingerprint {got}, expected {expected}): "
                "the config or the egs changed under a running experiment. Run snakemake "
                "again: it stops with what changed, or retrains with "
                "run.on_plan_change: retrain."
            )
