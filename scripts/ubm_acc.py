"""Rule ubm_acc: UBM EM statistics of one job (gmm-global-acc-stats)."""

from paravg.ivector.stages import ubm_accumulate
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
ubm_accumulate(
    ubm_path=snakemake.input.ubm,
    pca=snakemake.input.pca,
    feats_scp=snakemake.input.feats,
    spk2utt=snakemake.input.spk2utt,
    gselect=snakemake.input.gselect,
    job=snakemake.params.job,
    nj=snakemake.params.nj,
    every=snakemake.params.subsample,
    out=snakemake.output.acc,
)
