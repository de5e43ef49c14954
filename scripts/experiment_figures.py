"""Rule experiment_figures: the PNG figures of one experiment from its per-iteration JSON."""

from paravg.logs import setup_logging
from paravg.plots.outputs import experiment_figures

setup_logging(snakemake.log[0])
experiment_figures(
    exp_dir=snakemake.params.exp_dir,
    outputs=dict(snakemake.output.items()),
    name=snakemake.wildcards.exp,
    schedule_params=snakemake.params.schedule,
)
