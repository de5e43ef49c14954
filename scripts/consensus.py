"""Rule consensus: the mean of all jobs of an iteration, off the critical path."""

from paravg.logs import setup_logging
from paravg.sync.consensus import consensus_model

setup_logging(snakemake.log[0])
node = snakemake.params.node
consensus_model(
    model_paths=node["files"]["models"],
    stats_paths=node["files"]["stats"],
    iteration=node["iteration"],
    threshold=node["sync"]["objf_threshold"],
    model_out=snakemake.output.model,
    summary_out=snakemake.output.summary,
)
