"""Rule bmuf: the fan-in of an iteration by block momentum (start model + block state)."""

from paravg.logs import setup_logging
from paravg.sync.bmuf import bmuf_sync

setup_logging(snakemake.log[0])
bmuf_sync(
    model_paths=snakemake.input.models,
    stats_paths=snakemake.input.stats,
    global_in=snakemake.input.global_model,
    delta_in=snakemake.input.get("delta"),
    start_in=snakemake.input.start,
    iteration=snakemake.params.iteration,
    threshold=snakemake.params.threshold,
    bmuf_cfg=snakemake.params.bmuf,
    model_out=snakemake.output.model,
    global_out=snakemake.output.global_model,
    delta_out=snakemake.output.delta,
    summary_out=snakemake.output.summary,
)
