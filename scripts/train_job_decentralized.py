"""Rule train_job_decentralized: mix the neighbours' models into the start model, train."""

import torch

from paravg.devices import select_device
from paravg.logs import setup_logging
from paravg.sync.decentralized import run_decentralized_job
from paravg.train_job import JobSpec

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = dict(snakemake.params.job)
spec = JobSpec(**{k: p[k] for k in JobSpec.__dataclass_fields__ if k in p})
inp = snakemake.input
with select_device(p["device"]) as device:
    run_decentralized_job(
        initial=inp.get("initial"),
        mix_models=list(inp.get("mix_models", [])),
        mix_stats=list(inp.get("mix_stats", [])),
        mix_iteration=snakemake.params.mix_iteration,
        threshold=snakemake.params.threshold,
        own_end=inp.get("own_end"),
        own_start=inp.get("own_start"),
        start_out=snakemake.output.start,
        archive_prefix=p["archive"],
        model_out=snakemake.output.model,
        stats_out=snakemake.output.stats,
        spec=spec,
        ngsgd=p["ngsgd"],
        device=device,
    )
