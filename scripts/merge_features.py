"""Rule merge_features: one feats.scp + utt2num_frames from the split jobs; the set's
targets are checked against the feature lengths."""

from paravg.features import merge_feature_splits
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
merge_feature_splits(
    split_scps=list(snakemake.input.scps),
    split_utt2num_frames=list(snakemake.input.utt2num_frames),
    feats_scp=snakemake.output.feats_scp,
    utt2num_frames=snakemake.output.utt2num_frames,
    split_reports=list(snakemake.input.reports),
    report=snakemake.output.report,
    prepared_dir=snakemake.params.data_dir,
    targets_length_tolerance=snakemake.params.targets_length_tolerance,
)
