"""Rule ubm_gselect: top-N Gaussians per frame under the initial UBM (gmm-gselect), one job."""

from paravg.ivector.stages import ubm_gselect
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
ubm_gselect(
    ubm_path=snakemake.input.ubm,
    pca=snakemake.input.pca,
    feats_scp=snakemake.input.feats,
    spk2utt=snakemake.input.spk2utt,
    job=snakemake.params.job,
    nj=snakemake.params.nj,
    num_gselect=snakemake.params.num_gselect,
    every=snakemake.params.subsample,
    out=snakemake.output.gselect,
)
