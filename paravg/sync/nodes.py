"""The kinds of sync node, and the runner of one node (torch-free).

A sync method (:mod:`paravg.sync.registry`) names the node kind that writes its synced
model once per iteration, off the critical path: ``average`` (Kaldi's ``nnet3-average``
into ``<t>.pt``), ``bmuf`` (``<t>.pt`` and the block state the jobs of t + 1 read) or
``consensus`` (the mean of the decentralized learners, for diagnostics and the final
model). A kind on the per-job axis runs once per (t, j): delay-by-one's ``mix_node``,
which writes learner j's start ``<t>/job<j>.start.pt`` (the method's ``mix_inputs``).

:data:`NODE_KINDS` is the table ``rules/sync.smk`` makes one rule per entry from
(``scripts/sync_node.py``), :meth:`paravg.dag.training.TrainDag.node_outputs` gives each
its files, its :class:`~paravg.contracts.NodeRule` or :class:`~paravg.contracts.MixRule`
its params, and :func:`run_node` is what the rule runs: the inputs' plan checked
(:func:`paravg.provenance.check_input_fingerprints`), then the kind's function, imported
only then (torch stays out of the snakemake process that reads this table).

In Kaldi the node is the ``nnet3-average`` call between iterations
(``steps/libs/nnet3/train/common.py: get_average_nnet_model``); BMUF and the consensus have no
Kaldi counterpart. A new kind of node is one :class:`NodeKind` entry here, its function in
its own module of :mod:`paravg.sync`, and a method of the registry naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module

from paravg.contracts import MixRule, NodeRule
from paravg.provenance import check_input_fingerprints


@dataclass(frozen=True)
class NodeKind:
    """One kind of off-path sync node: the rule (``rules/sync.smk`` makes one per kind,
    running ``scripts/sync_node.py``), the files it writes per index, and the function
    that writes them.

    ``outputs``: (role, Layout kind of a per-index file ``kind(exp, t)``, or of a per-job
    file ``kind(exp, t, j)`` with ``per_job``), the summary JSON last; the first is the
    node's model. ``run``: ``"module:function"`` called as
    ``function(files, sync, iteration, outputs, plan)`` with the node's input files by role,
    the plan's sync params of that iteration, the iteration whose jobs it reads, the output
    paths by role and ``plan`` (``fingerprint``: what its outputs stand for). The record of
    each model file it writes names the rule that wrote it
    (:func:`paravg.provenance.model_producer`).

    ``per_job``: one node per (t, j) instead of per t. ``rule``: its rule contract
    (:mod:`paravg.contracts`), whose params the DAG gives it. ``temporary``: the roles that
    are temporary job files (``run.keep_job_models``). ``frontier``: the resume frontier
    (:class:`paravg.resume.Frontiers`) its index lies above.
    """

    name: str
    summary: str
    outputs: tuple[tuple[str, str], ...]
    run: str
    mem_mb: int = 2000
    per_job: bool = False
    rule: type[NodeRule] | type[MixRule] = NodeRule
    temporary: tuple[str, ...] = ()
    frontier: str = "node"

    @property
    def wildcards(self) -> tuple[str, ...]:
        """The wildcards of its files and jobs: (exp, t), and j on the per-job axis."""
        return ("exp", "t", "j") if self.per_job else ("exp", "t")

    @property
    def log_pattern(self) -> str:
        """Its log's name under ``logs/<rule>/`` (as the train jobs': ``{exp}/{t}/job{j}``)."""
        return "{exp}/{t}/job{j}" if self.per_job else "{exp}/{t}"

    @property
    def layout_kinds(self) -> tuple[str, ...]:
        return tuple(kind for _, kind in self.outputs)

    @property
    def model_kinds(self) -> tuple[str, ...]:
        """The Layout kinds of the model files it writes (all but the summary)."""
        return self.layout_kinds[:-1]

    @property
    def summary_kind(self) -> str:
        return self.layout_kinds[-1]


#: Every kind of sync node, by rule name. A method names one; a new kind is one entry.
NODE_KINDS: dict[str, NodeKind] = {
    k.name: k
    for k in (
        NodeKind(
            "average", "Kaldi's nnet3-average: <t>.pt, every job's next start",
            (("model", "model"), ("summary", "sync_summary")),
            "paravg.sync.average:average_node",
        ),
        NodeKind(
            "bmuf", "<t>.pt and the block state (g, delta) the jobs of t + 1 read",
            (("model", "model"), ("global_model", "bmuf_global"), ("delta", "bmuf_delta"),
             ("summary", "sync_summary")),
            "paravg.sync.bmuf:bmuf_node",
        ),
        NodeKind(
            "consensus", "the mean of all learners (diagnostics and the final model)",
            (("model", "consensus_model"), ("summary", "consensus_summary")),
            "paravg.sync.consensus:consensus_node",
        ),
        NodeKind(
            "mix_node", "delay-by-one's start s_j^{t−1} of learner j, one per (t, j)",
            (("model", "job_start"), ("record", "job_start_record")),
            "paravg.sync.adpsgd:mix_node",
            mem_mb=2000,  # the 3 neighbours' starts and the own job's two models
            per_job=True, rule=MixRule, temporary=("model",), frontier="mix",
        ),
    )
}  # fmt: skip


def kinds(per_job: bool) -> list[NodeKind]:
    """The node kinds of one axis: per index (False) or per (index, job) (True)."""
    return [k for k in NODE_KINDS.values() if k.per_job == per_job]


def node_summary_kinds() -> tuple[str, ...]:
    """The Layout kinds of the nodes' per-index summaries, in the table's order (the
    fan-in's ``sync_summary`` before the consensus's): what the plots read."""
    return tuple(dict.fromkeys(k.summary_kind for k in kinds(per_job=False)))


def run_node(kind: str, params: dict, outputs: dict) -> None:
    """Run the sync node of ``kind`` (its :class:`NodeKind` function) with its rule params
    (the kind's contract, :mod:`paravg.contracts`): the jobs' statistics it reads must
    carry the plan's fingerprint its inputs stand for (checked before anything is read or
    written), and its summary records the fingerprint of its outputs (``plan``), which a
    job starting from the node's ``<t>.pt`` checks instead of the N statistics."""
    node = NODE_KINDS[kind]
    rule = node.rule.from_params(params)
    check_input_fingerprints(rule.files.get("stats", []), rule.inputs_fingerprint)
    module, function = node.run.split(":")
    getattr(import_module(module), function)(
        files=rule.files,
        sync=rule.sync,
        iteration=rule.iteration,
        outputs=outputs,
        plan={"fingerprint": rule.fingerprint},
    )
