"""Rule compute_cmvn: per-speaker CMVN stats (Kaldi compute-cmvn-stats --spk2utt)."""

import logging

from paravg.features import compute_cmvn
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
summary = compute_cmvn(
    feats_scp=snakemake.input.feats_scp,
    spk2utt=snakemake.input.spk2utt,
    cmvn_ark=snakemake.output.ark,
    cmvn_scp=snakemake.output.scp,
)
logging.getLogger("compute_cmvn").info("%s", summary)
