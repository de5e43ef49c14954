"""Rule graph_demo_words: the demo's lexicon, word bigram, G and HCLG."""

from paravg.graph.build import build_demo_word_graph
from paravg.graph.hclg import GraphOptions
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
build_demo_word_graph(
    train_text=snakemake.params.text,
    train_ctm=snakemake.params.ctm,
    out_dir=snakemake.params.out_dir,
    options=GraphOptions(**snakemake.params.options),
    chain=snakemake.params.get("chain", False),  # graph_demo_chain_words, graph_chain_phones
    chain_tree=next(iter(snakemake.input.get("chain_tree", [])), None),  # the biphone tree
)
