"""Rule ubm_subset: the training set's subset the PCA and UBM are trained on
(utils/subset_data_dir.sh before train_diag_ubm.sh)."""

from paravg.ivector.stages import subset_training_data
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
subset_training_data(
    feats_scp=snakemake.input.feats,
    spk2utt=snakemake.input.spk2utt,
    cmvn_scp=snakemake.input.cmvn,
    num_utts=snakemake.params.num_utts,
    out_feats_scp=snakemake.output.feats,
    out_spk2utt=snakemake.output.spk2utt,
    out_cmvn_scp=snakemake.output.cmvn,
)
