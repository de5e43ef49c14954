"""Rule experiment_config: the effective configuration of one experiment (YAML + HTML)."""

from paravg.logs import setup_logging
from paravg.plots.outputs import experiment_config

setup_logging(snakemake.log[0])
experiment_config(
    name=snakemake.wildcards.exp,
    resolved=snakemake.params.resolved,
    overrides=snakemake.params.overrides,
    yaml_out=snakemake.output.yaml,
    html_out=snakemake.output.html,
    schedule_params=snakemake.params.schedule,
)
