"""Rule extractor_acc: i-vector extractor EM statistics of one job (ivector-extractor-acc-stats)."""

from paravg.ivector.stages import extractor_accumulate
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
extractor_accumulate(
    extractor_path=snakemake.input.extractor,
    pca=snakemake.input.pca,
    feats_scp=snakemake.input.feats,
    spk2utt=snakemake.input.spk2utt,
    posteriors=snakemake.input.post,
    job=snakemake.params.job,
    nj=snakemake.params.nj,
    every=snakemake.params.subsample,
    out=snakemake.output.acc,
)
