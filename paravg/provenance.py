"""Who wrote each model file, its checksum, and the way out of a damaged one (torch-free).

Every rule that writes a model file records, in the JSON it writes beside it
(``init.json``, ``<t>/job<j>.json``, ``<t>/job<j>.start.json``, ``sync/<t>.json``,
``consensus/<t>.json``, ``combine.json``, ``final.json``), the file's sha256 (key
``sha256``, by the file's path relative to the experiment dir) and its own name (key
``rule``: :func:`record_of`). :func:`model_producer` finds the JSON of a model file from
its path alone (:data:`MODEL_RECORDS`, a fact of the layout) and reads the rule there;
for a record without ``rule`` (a run of paravg before records named their writer) it
falls back to the rule such a run's files had (:data:`RULES_WITHOUT_RECORD`). Every reader
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

Kaldi has no counterpart: its scripts trust the files of a run's directory. Where next:
``check_egs_identity`` (the egs a job was planned with, :mod:`paravg.train_job`) is a check
of the same kind and can join these.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass

from paravg.errors import ModelFileError, TrainingError
from paravg.io import read_json
from paravg.layout import Layout

log = logging.getLogger(__name__)

#: Layout kind of each model file -> the Layout kind of the JSON its writer records it in
#: (None: the EMA model, whose rule records nothing). A delay-by-one start
#: (``job_start``) written by its mix node is recorded in the node's own
#: ``job_start_record`` instead of the job's statistics (:func:`model_producer`). A new
#: kind of model file (a new sync node's) is one entry.
MODEL_RECORDS: dict[str, str | None] = {
    "init_model": "init_stats",
    "job_start": "job_stats",
    "job_model": "job_stats",
    "ema_model": None,
    "combined_model": "combine_summary",
    "final_model": "final_summary",
    "model": "sync_summary",
    "bmuf_global": "sync_summary",
    "bmuf_delta": "sync_summary",
    "consensus_model": "consensus_summary",
}

#: The rule of a model file whose record names none: the EMA model (no record), and the
#: files of a run of paravg before the records named their writer, whose rules were
#: then these. Two were told apart by the files beside them: ``<t>.pt`` was bmuf's when
#: bmuf/<t>.pt and bmuf/<t>.delta.pt existed, average's otherwise; a ``job_start`` with a
#: ``job_start_record`` was its mix node's. Frozen: a new writer records its name.
RULES_WITHOUT_RECORD: dict[str, str] = {
    "init_model": "init_model",
    "job_start": "train_job_keep_start",
    "job_model": "train_job",
    "ema_model": "ema",
    "combined_model": "combine",
    "final_model": "priors",
    "model": "average",
    "bmuf_global": "bmuf",
    "bmuf_delta": "bmuf",
    "consensus_model": "consensus",
}
_WILDCARDS = {"exp": "[^/]+", "t": "[0-9]+", "job": "[0-9]+"}  # wildcard -> its regex


@dataclass(frozen=True)
class ModelProducer:
    """The rule that wrote a model file, and the JSON where it recorded the file's sha256."""

    rule: str
    record: str | None  # the producer's JSON (None: the rule writes none, e.g. ema)
    key: str  # the file's path relative to its experiment dir: its key in ``sha256``


def _args(kind: str) -> tuple[str, ...]:
    """The wildcards a Layout method of a model file or its record takes."""
    if kind in ("job_model", "job_start", "job_stats", "job_start_record"):
        return ("exp", "t", "job")
    per_experiment = ("init_model", "init_stats", "combined_model", "combine_summary")
    if kind in (*per_experiment, "final_model", "final_summary"):
        return ("exp",)
    return ("exp", "t")


def _regex(kind: str) -> re.Pattern:
    """The paths of ``kind`` under any results root, with a named group per wildcard."""
    probe = getattr(Layout("\0root"), kind)(*(f"\0{a}" for a in _args(kind)))
    pattern = re.escape(probe).replace(re.escape("\0root"), "(?P<root>.*)")
    for a in _args(kind):
        pattern = pattern.replace(re.escape(f"\0{a}"), f"(?P<{a}>{_WILDCARDS[a]})")
    return re.compile(pattern + "$")


@functools.cache
def _regexes() -> dict[str, re.Pattern]:
    return {kind: _regex(kind) for kind in MODEL_RECORDS}


def _recorded_rule(record: str | None) -> str | None:
    """The ``rule`` a record names; None without one (no record, or an older paravg's)."""
    if record is None:
        return None
    try:
        with open(record) as f:
            rule = json.load(f).get("rule")
    except (OSError, ValueError, AttributeError):
        return None
    return rule if isinstance(rule, str) else None


def _rule_without_record(layout: Layout, kind: str, record_kind: str | None, where) -> str:
    """:data:`RULES_WITHOUT_RECORD`, with the two cases told apart by the files beside."""
    if record_kind == "job_start_record":
        return "mix_node"
    if kind == "model":
        exp, t = where["exp"], where["t"]
        if all(os.path.exists(p) for p in (layout.bmuf_global(exp, t), layout.bmuf_delta(exp, t))):
            return "bmuf"
    return RULES_WITHOUT_RECORD[kind]


@dataclass(frozen=True)
class _ModelFile:
    """A model file's place: its kind, its layout, its wildcards and its record's kind."""

    kind: str
    layout: Layout
    where: dict
    record_kind: str | None
    key: str

    @property
    def record(self) -> str | None:
        if self.record_kind is None:
            return None
        return getattr(self.layout, self.record_kind)(
            *(self.where[a] for a in _args(self.record_kind))
        )


def _model_file(path) -> _ModelFile | None:
    """Where the model file ``path`` sits (under any results root); None for other files."""
    text = str(path)
    for kind, regex in _regexes().items():
        if not (m := regex.match(text)):
            continue
        layout = Layout(m["root"])
        where = {a: m[a] for a in _args(kind)}
        record_kind = MODEL_RECORDS[kind]
        if kind == "job_start" and os.path.exists(layout.job_start_record(*where.values())):
            record_kind = "job_start_record"  # delay-by-one's start: its mix node wrote it
        key = text[len(layout.exp_dir(where["exp"])) + 1 :]
        return _ModelFile(kind, layout, where, record_kind, key)
    return None


def model_producer(path) -> ModelProducer | None:
    """Who wrote the model file ``path`` (under any results root): the rule its record
    names, or :data:`RULES_WITHOUT_RECORD`'s; None for other files."""
    place = _model_file(path)
    if place is None:
        return None
    record = place.record
    rule = _recorded_rule(record) or _rule_without_record(
        place.layout, place.kind, place.record_kind, place.where
    )
    return ModelProducer(rule, record, place.key)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def checksums(written: dict) -> dict[str, str]:
    """``{path: sha256}`` of files a rule wrote -> the ``sha256`` entry of its JSON."""
    out = {}
    for path, digest in written.items():
        place = _model_file(path)
        out[place.key if place else os.path.basename(str(path))] = digest
    return out


def record_of(rule: str, written: dict) -> dict:
    """What the JSON of rule ``rule`` records of the model files it wrote (``{path:
    sha256}``): ``{"rule": rule, "sha256": {key: sha256}}``."""
    return {"rule": rule, "sha256": checksums(written)}


def recorded_sha256(path) -> str | None:
    """The sha256 the producer of ``path`` recorded, None when it recorded none."""
    place = _model_file(path)
    if place is None or place.record is None:
        return None
    try:
        with open(place.record) as f:
            record = json.load(f)
    except (OSError, ValueError):
        return None
    sums = record.get("sha256") if isinstance(record, dict) else None
    return sums.get(place.key) if isinstance(sums, dict) else None


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
