# Decoding (fan-out over decode.nj split jobs per experiment x eval set: one lattice search
# per utterance and graph) and scoring (the LMWT x WIP grid applied to the lattices).


rule decode_split:
    input:
        unpack(from_dag("recognition.decode_inputs")),
    output:
        **RECOGNITION.split_outputs("{j}"),
    params:
        nj=config["decode"]["nj"],
        # a chain experiment's graphs (graph/chain_*) and scales (paravg.dag.recognition)
        graph_dirs=lambda wildcards: RECOGNITION.graph_dirs(wildcards.exp),
        options=lambda wildcards: RECOGNITION.search_options(wildcards.exp),
        text=from_dag("layout.text"),  # may be absent: WER skipped
    log:
        LAYOUT.log("decode", "{exp}/{set}/split{j}"),
    benchmark:
        LAYOUT.benchmark("decode", "{exp}/{set}/split{j}")
    conda:
        "../envs/paravg.yaml"
    threads: 1  # the decoder is single-threaded; the fan-out over nj gives the parallelism
    resources:
        # the model, both graphs, and the split's longest utterance's lattice: 500 MB +
        # decode.mem_mb_per_minute per minute of it (paravg.decode.split)
        mem_mb=from_dag("recognition.decode_mem_mb"),
        runtime=120,
    script:
        "../scripts/decode.py"


rule score:
    input:
        unpack(from_dag("recognition.score_inputs")),
    output:
        scores=LAYOUT.decode_scores("{exp}", "{set}"),
        wer_details=LAYOUT.decode_details("{exp}", "{set}", "wer"),
        per_details=LAYOUT.decode_details("{exp}", "{set}", "per"),
        hyps=LAYOUT.decode_hyps("{exp}", "{set}"),
        ctm=LAYOUT.decode_ctm("{exp}", "{set}"),
    params:
        decode_dir=from_dag("layout.decode_dir"),  # wer_details/, per_details/
        graph_dirs=lambda wildcards: RECOGNITION.graph_dirs(wildcards.exp),
        grids=RECOGNITION.grids(),
        ctm=RECOGNITION.ctm_options(),  # get_ctm_conf.sh's --beam, --decode-mbr
        frame_shift=0.01,  # s per feature frame; x f at a low frame rate (paravg.decode.score)
        text=from_dag("layout.text"),
        targets=from_dag("layout.targets_scp"),
        data_dir=from_dag("layout.data_dir"),  # segments: the CTM in recording time
    log:
        LAYOUT.log("score", "{exp}/{set}"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=1000,  # one lattice at a time; hypotheses and references of one set
        runtime=10,
    script:
        "../scripts/score.py"
