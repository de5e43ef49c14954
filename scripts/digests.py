"""Rule digests: a sha256 per stage of the run, beside the results table."""

from paravg.digests import write_digests
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
write_digests(
    snakemake.params.stages,
    results=snakemake.config["results"],
    out_json=snakemake.output.json,
    out_md=snakemake.output.md,
)
