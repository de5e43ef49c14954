"""Rule extractor_post: scaled UBM posteriors of one job, computed once (gmm-global-get-post)."""

from paravg.ivector.stages import extractor_posteriors
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
extractor_posteriors(
    ubm_path=snakemake.input.ubm,
    pca=snakemake.input.pca,
    feats_scp=snakemake.input.feats,
    spk2utt=snakemake.input.spk2utt,
    job=snakemake.params.job,
    nj=snakemake.params.nj,
    every=snakemake.params.subsample,
    num_gselect=snakemake.params.num_gselect,
    min_post=snakemake.params.min_post,
    posterior_scale=snakemake.params.posterior_scale,
    out=snakemake.output.post,
)
