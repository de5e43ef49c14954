"""Rule compute_features: hires MFCC of split j of nj (Kaldi steps/make_mfcc.sh, one job)."""

from paravg.features import MfccOptions, compute_features_split
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
features = snakemake.params.features
compute_features_split(
    data_dir=snakemake.params.data_dir,
    nj=int(snakemake.wildcards.nj),
    job=int(snakemake.wildcards.j),
    opts=MfccOptions.from_config(features, snakemake.params.sample_rate),
    srand=features["srand"],
    ark=snakemake.output.ark,
    scp=snakemake.output.scp,
    utt2num_frames=snakemake.output.utt2num_frames,
    report=snakemake.output.report,
    compress=features["compress"],
)
