# Decoding graphs: results/graph/words (WER) and results/graph/phones (PER).
# graph.source picks the rule that writes results/graph/words (demo | lang | hclg); the
# decoder and the Kaldi export read that directory only (paravg.graph.build documents it).


if RECOGNITION.graph_source == "demo" and not PARAVG.gmm.enabled:  # gmm: rules/gmm.smk

    rule graph_demo_words:
        input:
            # the corpus rule writes text and phone_ctm beside wav.scp (not declared)
            done=LAYOUT.demo_file("done"),
        output:
            RECOGNITION.graph_outputs("words"),
        params:
            text=RECOGNITION.demo_train_file("text"),
            ctm=RECOGNITION.demo_train_file("phone_ctm"),
            out_dir=layout_param("graph_dir", "words"),
            options=RECOGNITION.graph_options(),
        log:
            LAYOUT.log("graph", "demo_words"),
        benchmark:
            LAYOUT.benchmark("graph", "demo_words")
        conda:
            "../envs/paravg.yaml"
        threads: 1  # OpenFst operations are single-threaded
        resources:
            mem_mb=2000,  # a few hundred words: small graphs
            runtime=15,
        script:
            "../scripts/graph_demo_words.py"


if RECOGNITION.per_enabled:

    rule graph_phones:
        input:
            targets=LAYOUT.targets_scp(PARAVG.source_train_set),  # the source, not its copies
        output:
            RECOGNITION.graph_outputs("phones"),
        params:
            out_dir=layout_param("graph_dir", "phones"),
            options=RECOGNITION.graph_options(),
            sil_prob=config["graph"]["phone_sil_prob"],
        log:
            LAYOUT.log("graph", "phones"),
        conda:
            "../envs/paravg.yaml"
        threads: 1  # OpenFst operations are single-threaded
        resources:
            mem_mb=1000,  # 39 phone "words"
            runtime=10,
        script:
            "../scripts/graph_phones.py"


if RECOGNITION.graph_source == "lang":

    rule graph_lang:
        input:
            unpack(from_dag("recognition.user_graph_inputs")),
        output:
            RECOGNITION.graph_outputs("words"),
        params:
            lang_dir=config["graph"]["lang_dir"],
            out_dir=layout_param("graph_dir", "words"),
            options=RECOGNITION.graph_options(),
        log:
            LAYOUT.log("graph", "lang"),
        benchmark:
            LAYOUT.benchmark("graph", "lang")
        conda:
            "../envs/paravg.yaml"
        threads: 1  # OpenFst operations are single-threaded
        resources:
            mem_mb=16000,  # a user's G can be large (determinisation of LG and HCLG)
            runtime=240,
        script:
            "../scripts/graph_lang.py"


if RECOGNITION.graph_source == "hclg":

    rule graph_hclg:
        input:
            unpack(from_dag("recognition.user_graph_inputs")),
        output:
            RECOGNITION.graph_outputs("words"),
        params:
            out_dir=layout_param("graph_dir", "words"),
        log:
            LAYOUT.log("graph", "hclg"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=8000,  # the user's HCLG is read whole to check its labels
            runtime=30,
        script:
            "../scripts/graph_hclg.py"


# The graphs of model.objective chain experiments (paravg.graph.build with chain=True): the
# same lexicon and LMs, the chain topology and tree (target k's phone: pdfs 2k, 2k + 1),
# graph.chain_self_loop_scale / chain_transition_scale (1.0, Kaldi's chain mkgraph.sh).
# With model.chain.tree biphone: the chain tree (<egs>/chain/tree, chain_den) on the lang's
# phones and the context transducer at width 2, central position 1 (paravg.graph.chain_tree).
# (data.targets gmm: graph_gmm_chain_words of rules/gmm.smk, on the GMM lang)
if (
    RECOGNITION.chain_experiments
    and RECOGNITION.graph_source == "demo"
    and not PARAVG.gmm.enabled
):

    use rule graph_demo_words as graph_demo_chain_words with:
        input:
            done=LAYOUT.demo_file("done"),
            chain_tree=PARAVG.chain.tree_file(),
        output:
            RECOGNITION.graph_outputs("chain_words"),
        params:
            text=RECOGNITION.demo_train_file("text"),
            ctm=RECOGNITION.demo_train_file("phone_ctm"),
            out_dir=layout_param("graph_dir", "chain_words"),
            options=RECOGNITION.chain_graph_options(),
            chain=True,
        log:
            LAYOUT.log("graph", "demo_chain_words"),
        benchmark:
            LAYOUT.benchmark("graph", "demo_chain_words")


if RECOGNITION.chain_experiments and RECOGNITION.per_enabled:

    use rule graph_phones as graph_chain_phones with:
        input:
            targets=LAYOUT.targets_scp(PARAVG.source_train_set),
            chain_tree=PARAVG.chain.tree_file(),
        output:
            RECOGNITION.graph_outputs("chain_phones"),
        params:
            out_dir=layout_param("graph_dir", "chain_phones"),
            options=RECOGNITION.chain_graph_options(),
            sil_prob=config["graph"]["phone_sil_prob"],
            chain=True,
        log:
            LAYOUT.log("graph", "chain_phones"),
