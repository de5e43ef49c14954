"""Rule train_job: one job of one iteration -> <t+1>/job<j>.pt and its stats JSON."""

import torch

from paravg.devices import select_device
from paravg.logs import setup_logging
from paravg.train_job import JobSpec, run_train_job

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = dict(snakemake.params.job)
spec = JobSpec(
    iteration=p["iteration"],
    job=p["job"],
    learning_rate=p["learning_rate"],
    minibatch_size=p["minibatch_size"],
    max_param_change=p["max_param_change"],
    frame=p["frame"],
    shuffle_buffer_size=p["shuffle_buffer_size"],
    srand=p["srand"],
    straggler_factor=p["straggler_factor"],
)
with select_device(p["device"]) as device:
    run_train_job(
        model_in=snakemake.input.model,
        archive_prefix=p["archive"],
        model_out=snakemake.output.model,
        stats_out=snakemake.output.stats,
        spec=spec,
        ngsgd=p["ngsgd"],
        device=device,
    )
