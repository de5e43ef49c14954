"""Rule train_job: form the start model (sync method), train one archive -> <t+1>/job<j>.*"""

from dataclasses import replace

import torch

from paravg.devices import select_device
from paravg.logs import setup_logging
from paravg.train_job import JobSpec, run_planned_job

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
plan, resources = snakemake.params.plan, snakemake.resources
spec = replace(JobSpec(**plan["job"]), straggler_factor=float(resources.straggler_factor))
with select_device(resources.train_device) as device:
    run_planned_job(
        inputs=plan["files"],
        plan=plan,
        spec=spec,
        model_out=snakemake.output.model,
        stats_out=snakemake.output.stats,
        start_out=snakemake.output.get("start"),
        device=device,
    )
