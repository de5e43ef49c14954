"""Rule perturb_data: the training set's speed and volume copies (paravg.perturb)."""

from paravg.logs import setup_logging
from paravg.perturb import PerturbOptions, perturb_data_dir

setup_logging(snakemake.log[0])
perturb_data_dir(
    src=snakemake.params.src,
    dst=snakemake.params.dst,
    options=PerturbOptions.from_config(snakemake.params.perturb),
    sample_rate=snakemake.params.sample_rate,
    snip_edges=snakemake.params.snip_edges,
)
