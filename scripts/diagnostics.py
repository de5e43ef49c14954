"""Rule diagnostics: log-prob/accuracy of <t>.pt on train_diag/valid_diag, and progress."""

import torch

from paravg.diagnostics import compute_diagnostics
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
compute_diagnostics(
    model_path=snakemake.input.model,
    prev_path=snakemake.input.get("prev"),
    valid_prefix=snakemake.params.valid,
    train_prefix=snakemake.params.train,
    out_path=snakemake.output[0],
    iteration=int(snakemake.wildcards.t),
)
