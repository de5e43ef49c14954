"""Rule decode_split: decode split j of an eval set at every scoring setting."""

import torch

from paravg.decode.decoder import DecodeOptions, decode_split
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
decode_split(
    model_path=snakemake.input.model,
    graph_dirs=snakemake.params.graph_dirs,
    feats_scp=snakemake.input.feats,
    out_path=snakemake.output[0],
    nj=snakemake.params.nj,
    job=int(snakemake.wildcards.j),
    lmwts=snakemake.params.lmwts,
    wips=snakemake.params.wips,
    opts=DecodeOptions(**snakemake.params.options),
    ivectors_scp=snakemake.input.get("ivectors"),
    period_path=snakemake.input.get("period"),
    text_path=snakemake.params.get("text"),
)
