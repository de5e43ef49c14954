"""The kinds of off-path sync node, and the runner of one node (torch-free).

A sync method (:mod:`paravg.sync.registry`) names the node kind that writes its synced
model once per iteration, off the critical path: ``average`` (Kaldi's ``nnet3-average``
into ``<t>.pt``), ``bmuf`` (``<t>.pt`` and the block state the jobs of t + 1 read) or
``consensus`` (the mean of the decentralized learners, for diagnostics and the final
model). :data:`NODE_KINDS` is the table ``rules/sync.smk`` makes one rule per entry from
(``scripts/sync_node.py``), :meth:`paravg.dag.training.TrainDag.node_outputs` gives each
its files, and
:func:`run_node` is what the rule runs: the inputs' plan checked
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

from paravg.provenance import check_input_fingerprints


@dataclass(frozen=True)
class NodeKind:
    """One kind of off-path sync node: the rule (``rules/sync.smk`` makes one per kind,
    running ``scripts/sync_node.py``), the files it writes per index, and the function
    that writes them.

    ``outputs``: (role, Layout kind of a per-index file ``kind(exp, t)``), the summary JSON
    last; the first is the node's model. ``run``: ``"module:function"`` called as
    ``function(files, sync, iteration, outputs)`` with the node's input files by role, the
    plan's sync params of that iteration, the iteration whose jobs it reads and the output
    paths by role. The record of each model file it writes names the rule that wrote it
    (:func:`paravg.provenance.model_producer`).
    """

    name: str
    summary: str
    outputs: tuple[tuple[str, str], ...]
    run: str
    mem_mb: int = 2000

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
    )
}  # fmt: skip


def node_summary_kinds() -> tuple[str, ...]:
    """The Layout kinds of the nodes' per-index summaries, in the table's order (the
    fan-in's ``sync_summary`` before the consensus's): what the plots read."""
    return tuple(dict.fromkeys(k.summary_kind for k in NODE_KINDS.values()))


def run_node(kind: str, node: dict, outputs: dict) -> None:
    """Run the sync node of ``kind`` (its :class:`NodeKind` function) with the rule params
    ``node`` (:meth:`paravg.plan.ExperimentPlan.node_rule_params`): the jobs' statistics it
    reads must carry the plan's fingerprint of its index (checked before anything is
    read or written), and its summary records that fingerprint (``plan``), which a job
    starting from the node's ``<t>.pt`` checks instead of the N statistics."""
    check_input_fingerprints(node["files"].get("stats", []), node["fingerprint"])
    module, function = NODE_KINDS[kind].run.split(":")
    getattr(import_module(module), function)(
        files=node["files"],
        sync=node["sync"],
        iteration=node["iteration"],
        outputs=outputs,
        plan={"fingerprint": node["fingerprint"]},
    )


def node_kinds_writing(layout_kind: str) -> list[NodeKind]:
    """The node kinds that write files of ``layout_kind`` (e.g. ``model``: average, bmuf)."""
    return [k for k in NODE_KINDS.values() if layout_kind in k.layout_kinds]
