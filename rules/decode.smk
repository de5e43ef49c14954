# Decoding (fan-out over decode.nj split jobs per experiment x eval set) and scoring.


rule decode_split:
    input:
        unpack(get_decode_inputs),
    output:
        LAYOUT.decode_split("{exp}", "{set}", "{j}"),
    params:
        nj=config["decode"]["nj"],
        graph_dirs=decode_graph_dirs(),
        lmwts=decode_lmwts(),
        wips=config["decode"]["word_ins_penalties"],
        options=decode_options(),
        text=lambda wc: LAYOUT.data_file(wc.set, "text"),  # may be absent: WER skipped
    log:
        LAYOUT.log("decode", "{exp}/{set}/split{j}"),
    benchmark:
        LAYOUT.benchmark("decode", "{exp}/{set}/split{j}")
    conda:
        "../envs/paravg.yaml"
    threads: 1  # the decoder is single-threaded; the fan-out over nj gives the parallelism
    resources:
        mem_mb=3000,  # the model, HCLG and its word-penalty copies, one utterance at a time
        runtime=120,
    script:
        "../scripts/decode.py"


rule score:
    input:
        unpack(get_score_inputs),
    output:
        scores=LAYOUT.decode_scores("{exp}", "{set}"),
        wer_details=LAYOUT.decode_details("{exp}", "{set}", "wer"),
        per_details=LAYOUT.decode_details("{exp}", "{set}", "per"),
    params:
        text=lambda wc: LAYOUT.data_file(wc.set, "text"),
        targets=lambda wc: LAYOUT.data_file(wc.set, "targets.scp"),
    log:
        LAYOUT.log("score", "{exp}/{set}"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=1000,  # hypotheses and references of one set
        runtime=10,
    script:
        "../scripts/score.py"
