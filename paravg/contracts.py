"""The rule contracts: what the plan hands each kind of planned rule (torch-free).

One frozen dataclass per kind of rule the plan (:class:`paravg.plan.ExperimentPlan`)
configures: a train job (:class:`JobRule`), an off-path sync node of one index
(:class:`NodeRule`) and delay-by-one's mix node of one (index, job) (:class:`MixRule`).
The plan builds them; :mod:`paravg.dag` gives the rules their :meth:`params` (plain
values: Snakemake's params are rerun triggers, so their shape is the on-disk contract and
stays as it was); the scripts read them back with :meth:`from_params`
(``scripts/train_job.py``, ``scripts/sync_node.py``). Kaldi has no counterpart: its
``train_dnn.py`` passes each ``nnet3-train`` call its options on the command line.

Fingerprints (:mod:`paravg.plan`, "the fingerprint chain"): ``fingerprint`` is what the
rule's own outputs carry (f of the layout index it writes), ``inputs_fingerprint`` what
the statistics it reads must carry (checked first: :mod:`paravg.provenance`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields


def _params(rule) -> dict:
    """The rule's fields as a dict, in declaration order (no copies of the values)."""
    return {f.name: getattr(rule, f.name) for f in fields(rule)}


@dataclass(frozen=True)
class JobRule:
    """Train job ``j`` of iteration ``t`` (rule ``train_job``, params ``plan``).

    ``job``: its :class:`paravg.plan.JobSpec` fields (``ExperimentPlan.job_params``);
    ``files``: role -> the files its start model is formed from (the sync method's start
    inputs); ``fingerprint``: f_{t+1}, recorded in its statistics; ``egs``: the egs identity
    the ``egs_info`` file must have; ``inputs_fingerprint``: what its inputs carry;
    ``sync``: the sync settings it forms the start with; ``method``: the sync method.
    """

    job: dict
    files: dict[str, list[str]]
    fingerprint: str
    egs: str
    egs_info: str
    inputs_fingerprint: str
    sync: dict
    method: str

    def params(self) -> dict:
        return _params(self)

    @classmethod
    def from_params(cls, params: dict) -> JobRule:
        return cls(**params)


@dataclass(frozen=True)
class NodeRule:
    """The sync node of layout index ``t`` (rules ``average``, ``bmuf``, ``consensus``,
    params ``node``): the iteration t − 1 whose jobs it reads, their sync settings, its
    input files by role, and f_t (its inputs' statistics carry it; its summary records it).
    """

    iteration: int
    sync: dict
    files: dict[str, list[str]]
    fingerprint: str

    @property
    def inputs_fingerprint(self) -> str:
        return self.fingerprint

    def params(self) -> dict:
        return _params(self)

    @classmethod
    def from_params(cls, params: dict) -> NodeRule:
        return cls(**params)


@dataclass(frozen=True)
class MixRule:
    """Delay-by-one's mix node writing s_j^{iteration} (rule ``mix_node``, params ``node``):
    its input files by role, the sync settings of the jobs of ``iteration`` − 1, the
    fingerprint its start stands for (index ``iteration``) and the one the neighbours'
    statistics must carry. Its params keep their shape (``fingerprints``: ``own``,
    ``inputs``)."""

    iteration: int
    files: dict[str, list[str]]
    sync: dict
    fingerprint: str
    inputs_fingerprint: str

    def params(self) -> dict:
        return {
            "iteration": self.iteration,
            "files": self.files,
            "sync": self.sync,
            "fingerprints": {"own": self.fingerprint, "inputs": self.inputs_fingerprint},
        }

    @classmethod
    def from_params(cls, params: dict) -> MixRule:
        fingerprints = params["fingerprints"]
        return cls(
            iteration=params["iteration"],
            files=params["files"],
            sync=params["sync"],
            fingerprint=fingerprints["own"],
            inputs_fingerprint=fingerprints["inputs"],
        )
