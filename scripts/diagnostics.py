"""Rule diagnostics: log-prob/accuracy of <t>.pt on train_diag/valid_diag, and progress;
then the experiment's TensorBoard event file gets every step now complete
(paravg.training_events, results/tb/<exp>/)."""

from pathlib import Path

import torch

from paravg.diagnostics import compute_diagnostics
from paravg.layout import Layout
from paravg.logs import setup_logging
from paravg.training_events import append_new_steps

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
# diag/<t>.json lies in the experiment directory (no param: adding one would rerun every
# finished diagnostic of an existing run)
exp_dir = Path(snakemake.output[0]).parent.parent
append_new_steps(Layout.from_exp_dir(exp_dir), exp_dir.name)
