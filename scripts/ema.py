"""Rule ema: e_t = α e_{t−1} + (1 − α) m_t (never read by a train job)."""

from paravg.logs import setup_logging
from paravg.sync.ema import update_ema_file

setup_logging(snakemake.log[0])
update_ema_file(
    prev_ema=snakemake.input.get("prev"),
    model_path=snakemake.input.model,
    decay=snakemake.params.decay,
    out_path=snakemake.output[0],
    iteration=int(snakemake.wildcards.t),
)
