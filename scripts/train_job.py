"""Rule train_job: form the start model (sync method), train one archive -> <t+1>/job<j>.*"""

import torch

from paravg.devices import select_device
from paravg.logs import setup_logging
from paravg.train_job import JobSpec, run_planned_job

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
plan, runtime = snakemake.params.plan, snakemake.params.runtime
job = dict(plan["job"])
spec = JobSpec(
    **{k: job[k] for k in JobSpec.__dataclass_fields__ if k in job},
    straggler_factor=runtime["straggler_factor"],
)
with select_device(runtime["device"]) as device:
    run_planned_job(
        inputs=plan["files"],
        plan=plan,
        spec=spec,
        archive_prefix=job["archive"],
        model_out=snakemake.output.model,
        stats_out=snakemake.output.stats,
        start_out=snakemake.output.get("start"),
        device=device,
    )
