"""Rule decode_split: one lattice search per utterance and graph for split j of a set."""

import torch

from paravg.decode.decoder import decode_split
from paravg.decode.search import SearchOptions
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
out = snakemake.output
decode_split(
    model_path=snakemake.input.model,
    graph_dirs=snakemake.params.graph_dirs,
    feats_scp=snakemake.input.feats,
    out_path=out.summary,
    lattice_paths={kind: out[f"lattices_{kind}"] for kind in snakemake.params.graph_dirs},
    nj=snakemake.params.nj,
    job=int(snakemake.wildcards.j),
    opts=SearchOptions(**snakemake.params.options),
    ivectors_scp=snakemake.input.get("ivectors"),
    period_path=snakemake.input.get("period"),
    text_path=snakemake.params.get("text"),
)
