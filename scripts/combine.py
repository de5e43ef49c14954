"""Rule combine: best uniform average of the newest models on the combine egs."""

import torch

from paravg.combine import combine_models
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
combine_models(
    model_paths=snakemake.input.models,
    combine_prefix=snakemake.params.egs,
    max_objective_evaluations=snakemake.params.max_objective_evaluations,
    model_out=snakemake.output.model,
    summary_out=snakemake.output.summary,
    ema_path=snakemake.input.get("ema"),
    ema_choice=snakemake.params.ema,
)
