"""Rule bmuf: one block of iteration t − 1's jobs -> the start model <t>.pt and the block
state (g, delta) that the jobs of iteration t + 1 read (off the critical path)."""

from paravg.logs import setup_logging
from paravg.sync.bmuf import bmuf_sync

setup_logging(snakemake.log[0])
node, inp = snakemake.params.node, snakemake.input
bmuf_sync(
    model_paths=inp.models,
    stats_paths=inp.stats,
    global_in=inp["global"],
    delta_in=inp.get("delta") or None,
    start_in=inp.start,
    iteration=node["iteration"],
    threshold=node["sync"]["objf_threshold"],
    bmuf_cfg=node["sync"]["bmuf"],
    model_out=snakemake.output.model,
    global_out=snakemake.output.global_model,
    delta_out=snakemake.output.delta,
    summary_out=snakemake.output.summary,
)
