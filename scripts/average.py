"""Rule average: the fan-in of an iteration (Kaldi nnet3-average / best job at t=0)."""

from paravg.io import save_torch_atomic, write_json_atomic
from paravg.logs import setup_logging
from paravg.sync.average import average_jobs

setup_logging(snakemake.log[0])
synced, summary = average_jobs(
    model_paths=snakemake.input.models,
    stats_paths=snakemake.input.stats,
    iteration=snakemake.params.iteration,
    threshold=snakemake.params.threshold,
)
save_torch_atomic(snakemake.output.model, synced)
write_json_atomic(snakemake.output.summary, summary)
