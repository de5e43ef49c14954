# Export an experiment's final model to Kaldi's formats (nnet3 final.mdl, online i-vector
# extractor, conf/, the word graph of rules/graph.smk): the directory Kaldi's online2
# decoders and vosk load.


rule export_kaldi:
    input:
        unpack(from_dag("recognition.export_inputs")),
    output:
        kaldi=directory(LAYOUT.kaldi_dir("{exp}")),
    params:
        features=config["features"],
        sample_rate=config["data"]["sample_rate"],
        ivector_options=PARAVG.ivector.online_options(),
        # a chain experiment's: graph/chain_words, decode.chain_acoustic_scale
        graph_dir=lambda wildcards: RECOGNITION.export_graph_dir(wildcards.exp),
        decoder=RECOGNITION.export_decoder_options(),
        acoustic_scale=lambda wildcards: RECOGNITION.export_acoustic_scale(wildcards.exp),
    log:
        LAYOUT.log("export_kaldi", "{exp}"),
    benchmark:
        LAYOUT.benchmark("export_kaldi", "{exp}")
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # Small: the network, the i-vector models and the graph, written once.
    resources:
        mem_mb=2000,
        runtime=15,
    script:
        "../scripts/export_kaldi.py"
