"""Rules average, bmuf, consensus and mix_node (one per paravg.sync.nodes.NODE_KINDS entry):
the sync node of index t (mix_node: of index t and job j), off the critical path
(paravg.sync.nodes.run_node: the inputs' plan checked, the node kind's function writes
its files, its summary or record records the plan)."""

from paravg.logs import setup_logging
from paravg.sync.nodes import run_node

setup_logging(snakemake.log[0])
run_node(snakemake.rule, snakemake.params.node, dict(snakemake.output.items()))
