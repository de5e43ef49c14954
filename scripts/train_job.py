"""Rule train_job: form the start model (sync method), train one archive -> <t+1>/job<j>.*"""

import torch

from paravg.contracts import JobRule
from paravg.devices import select_device
from paravg.logs import setup_logging
from paravg.train_job import run_planned_job

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
resources = snakemake.resources
with select_device(resources.train_device) as device:
    run_planned_job(
        JobRule.from_params(snakemake.params.plan),
        model_out=snakemake.output.model,
        stats_out=snakemake.output.stats,
        start_out=snakemake.output.get("start"),
        device=device,
        straggler_factor=float(resources.straggler_factor),
    )
