"""Rule graph_hclg: check a user's HCLG.fst + words.txt + final.mdl and take them in."""

from paravg.graph.user import import_hclg
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
import_hclg(
    hclg_fst=snakemake.input.hclg,
    words_txt=snakemake.input.words,
    final_mdl=snakemake.input.final_mdl,
    out_dir=snakemake.params.out_dir,
)
