"""Rule ivector_pca: PCA transform of the spliced, online-CMN'd features (get_pca_transform.sh)."""

from paravg.ivector.stages import train_pca
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
train_pca(
    feats_scp=snakemake.input.feats,
    cmvn_scp=snakemake.input.cmvn,
    out=snakemake.output.pca,
    dim=snakemake.params.dim,
    context=snakemake.params.context,
    max_utts=snakemake.params.max_utts,
    every=snakemake.params.subsample,
)
