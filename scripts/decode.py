"""Rule decode_split: one lattice search per utterance and graph for split j of a set."""

import torch

from paravg.data import read_origin
from paravg.decode.decoder import decode_split
from paravg.decode.options import CHAIN_SCALE_KEYS
from paravg.decode.search import SearchOptions
from paravg.decode.split import check_split_fits, read_num_frames
from paravg.layout import Layout
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
out = snakemake.output
# the split's longest utterance must fit in decode.max_mem_mb (config, not params: the
# limit is no rerun trigger), refused here before the model or graphs are loaded
layout = Layout(snakemake.config["results"])
set_ = snakemake.wildcards.set
origin = read_origin(layout.data_dir(set_))
check_split_fits(
    read_num_frames(layout.utt2num_frames(set_)),
    nj=snakemake.params.nj,
    job=int(snakemake.wildcards.j),
    mb_per_minute=snakemake.config["decode"]["mem_mb_per_minute"],
    max_mem_mb=snakemake.config["decode"]["max_mem_mb"],
    where=origin.wav if origin else lambda utt: f"{layout.data_dir(set_)}: utterance {utt!r}",
)
options = dict(snakemake.params.options)
# a chain experiment's scales (paravg.dag.recognition.Recognition.search_options)
chain = {k: options.pop(k) for k in CHAIN_SCALE_KEYS if k in options} or None
decode_split(
    model_path=snakemake.input.model,
    graph_dirs=snakemake.params.graph_dirs,
    feats_scp=snakemake.input.feats,
    out_path=out.summary,
    lattice_paths={kind: out[f"lattices_{kind}"] for kind in snakemake.params.graph_dirs},
    nj=snakemake.params.nj,
    job=int(snakemake.wildcards.j),
    opts=SearchOptions(**options),
    ivectors_scp=snakemake.input.get("ivectors"),
    period_path=snakemake.input.get("period"),
    text_path=snakemake.params.get("text"),
    chain=chain,
)
