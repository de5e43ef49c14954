"""Rule ubm_init: in-memory UBM initialisation (gmm-global-init-from-feats)."""

from paravg.ivector.stages import init_ubm
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
init_ubm(
    pca=snakemake.input.pca,
    feats_scp=snakemake.input.feats,
    spk2utt=snakemake.input.spk2utt,
    out=snakemake.output.ubm,
    out_json=snakemake.output.info,
    num_gauss=snakemake.params.num_gauss,
    num_iters_init=snakemake.params.num_iters_init,
    num_frames=snakemake.params.num_frames,
    every=snakemake.params.subsample,
    srand=snakemake.params.srand,
)
