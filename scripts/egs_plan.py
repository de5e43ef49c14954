"""Checkpoint egs: check the inputs, choose held-out utterances and split jobs, write info."""

from pathlib import Path

from paravg.egs.plan import EgsOptions, plan_egs
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
inp, out, params = snakemake.input, snakemake.output, snakemake.params
left, right = params.context
# data.targets gmm: the network's outputs are the tree's pdfs (paravg.dag.gmm)
num_pdfs = inp.get("num_pdfs")
num_targets = int(Path(num_pdfs).read_text()) if num_pdfs else params.num_targets
plan_egs(
    feats_scp=inp.feats_scp,
    utt2num_frames=inp.utt2num_frames,
    targets_scp=inp.targets_scp,
    utt2spk=inp.utt2spk,
    info_out=out.info,
    lists_dir=snakemake.params.lists_dir,
    options=EgsOptions.from_config(params.egs, left, right, num_targets),
    ivector_scp=inp.get("ivector_scp"),
    ivector_period_file=inp.get("ivector_period"),
    utt2uniq=inp.utt2uniq,
)
