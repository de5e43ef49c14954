"""Rule graph_phones: the PER graph (phones as words, phone bigram of the targets,
no optional silence as in Kaldi's TIMIT recipe)."""

from paravg.graph.build import build_phone_graph
from paravg.graph.hclg import GraphOptions
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
build_phone_graph(
    train_targets_scp=snakemake.input.targets,
    out_dir=snakemake.params.out_dir,
    options=GraphOptions(**snakemake.params.options),
    chain=snakemake.params.get("chain", False),  # graph_demo_chain_words, graph_chain_phones
    chain_tree=next(iter(snakemake.input.get("chain_tree", [])), None),  # the biphone tree
    sil_prob=snakemake.params.sil_prob,
)
