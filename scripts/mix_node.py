"""Rule mix_node: delay-by-one's start model of one learner -> <t>/job<j>.start.pt (.json)."""

from paravg.logs import setup_logging
from paravg.sync.decentralized import mix_node

setup_logging(snakemake.log[0])
node = snakemake.params.node
mix_node(
    files=node["files"],
    iteration=node["iteration"],
    sync=node["sync"],
    outputs=dict(snakemake.output.items()),
    fingerprints=node["fingerprints"],
)
