"""Rule report_comparison: validation curves of all experiments overlaid, results per eval set."""

from paravg.logs import setup_logging
from paravg.plots.outputs import comparison

setup_logging(snakemake.log[0])
comparison(
    exp_dirs=snakemake.params.exp_dirs,
    eval_sets=snakemake.params.eval_sets,
    figure_out=snakemake.output.figure,
    html_out=snakemake.output.html,
    markdown_out=snakemake.output.md,
)
