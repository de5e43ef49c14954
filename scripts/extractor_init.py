"""Rule extractor_init: i-vector extractor from the final UBM (ivector-extractor-init)."""

from paravg.ivector.stages import init_extractor
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
init_extractor(
    ubm_path=snakemake.input.ubm,
    out=snakemake.output.extractor,
    ivector_dim=snakemake.params.dim,
    srand=snakemake.params.srand,
)
