"""Rule bmuf: one block of iteration t − 1's jobs -> the start model <t>.pt and the block
state (g, delta) that the jobs of iteration t + 1 read (off the critical path)."""

from paravg.logs import setup_logging
from paravg.sync.bmuf import bmuf_sync

setup_logging(snakemake.log[0])
node = snakemake.params.node
files = node["files"]
bmuf_sync(
    model_paths=files["models"],
    stats_paths=files["stats"],
    global_in=files["global"][0],
    delta_in=(files["delta"] or [None])[0],
    start_in=files["start"][0],
    iteration=node["iteration"],
    threshold=node["sync"]["objf_threshold"],
    bmuf_cfg=node["sync"]["bmuf"],
    model_out=snakemake.output.model,
    global_out=snakemake.output.global_model,
    delta_out=snakemake.output.delta,
    summary_out=snakemake.output.summary,
)
