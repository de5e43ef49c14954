"""Rule extract_ivectors: online i-vectors of one job of a set (ivector-extract-online2)."""

from paravg.ivector.online import OnlineIvectorOptions
from paravg.ivector.stages import extract_online
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
extract_online(
    extractor_path=snakemake.input.extractor,
    ubm_path=snakemake.input.ubm,
    pca=snakemake.input.pca,
    feats_scp=snakemake.input.feats,
    spk2utt=snakemake.input.spk2utt,
    job=snakemake.params.job,
    nj=snakemake.params.nj,
    utts_per_spk_max=snakemake.params.utts_per_spk_max,
    opts=OnlineIvectorOptions(**snakemake.params.online),
    out_ark=snakemake.output.ark,
    out_scp=snakemake.output.scp,
)
