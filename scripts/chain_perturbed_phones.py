"""Rule chain_perturbed_phones: the perturbed training set's per-frame phones, the source
utterances' GMM alignment phones mapped to each copy (paravg.perturb.perturb_frame_labels)."""

import logging

from paravg.logs import setup_logging
from paravg.perturb import PerturbOptions, perturb_frame_labels

setup_logging(snakemake.log[0])
result = perturb_frame_labels(
    snakemake.input.scp,
    snakemake.input.targets,
    PerturbOptions.from_config(snakemake.params.perturb),
    snakemake.output.ark,
    snakemake.output.scp,
)
logging.getLogger("chain_perturbed_phones").info("%s", result)
