"""Rule priors: average posterior over training egs -> final.pt."""

import torch

from paravg.logs import setup_logging
from paravg.priors import adjust_priors

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
adjust_priors(
    model_in=snakemake.input.model,
    archives=snakemake.params.archives,
    num_egs=snakemake.params.prior_subset_size,
    model_out=snakemake.output.model,
    summary_out=snakemake.output.summary,
    srand=snakemake.params.srand,
)
