# GMM stage (data.targets: gmm): Kaldi's steps/train_mono.sh, train_deltas.sh and
# align_si.sh as nodes (paravg.dag.gmm, jobs in paravg.gmm.stages). Both EM loops have the
# shape of the i-vector stage's: per iteration x, gmm.nj accumulation jobs (fan-out, temp
# accumulators) and one estimate (fan-in) writing model x+1, with realignment jobs at the
# realign_iters. The final triphone alignment of every set, as ali-to-pdf targets, is the
# source dir that set's prepare_data reads; the network's outputs are the tree's pdfs.
# Each job streams its tables (a chunk, a model, an utterance): mem_mb and runtime are
# paravg/resources.py's formulas of its share of the corpus (the GMM section there).

if PARAVG.gmm.enabled:

    GMM = PARAVG.gmm

    ruleorder: gmm_mono_init > gmm_est
    ruleorder: gmm_tree > gmm_est

    if config["gmm"]["dict_dir"] is None:

        rule gmm_dict:
            input:
                done=LAYOUT.demo_file("done"),
                wav=LAYOUT.demo_file(f"{PARAVG.source_train_set}/wav.scp"),
            output:
                GMM.dict_files(),
            params:
                sources=GMM.demo_dict_sources(),
                dict_dir=lambda wildcards: GMM.dict_dir(),
            log:
                LAYOUT.log("gmm_dict", "demo"),
            conda:
                "../envs/paravg.yaml"
            threads: 1
            resources:
                mem_mb=from_dag("mem_mb", "gmm_dict"),  # paravg/resources.py
                runtime=from_dag("runtime", "gmm_dict"),
            script:
                "../scripts/gmm_stage.py"

    rule gmm_lang:
        input:
            GMM.dict_files(),
        output:
            GMM.lang_files(),
        params:
            dict_dir=lambda wildcards: GMM.dict_dir(),
            lang_dir=lambda wildcards: GMM.lang_dir(),
            oov=config["gmm"]["oov"],
        log:
            LAYOUT.log("gmm_lang", "lang"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=from_dag("mem_mb", "gmm_lang"),  # paravg/resources.py
            runtime=from_dag("runtime", "gmm_lang"),
        script:
            "../scripts/gmm_stage.py"

    # 13 MFCCs (conf/mfcc.conf) | per-speaker CMVN | add-deltas of job j (speaker-disjoint)
    rule gmm_feats:
        input:
            from_dag("gmm.set_inputs"),
        output:
            ark=GMM.feats("{set}", "{j}", "ark"),
            scp=GMM.feats("{set}", "{j}", "scp"),
        params:
            src=from_dag("gmm.source_dir"),
            nj=config["gmm"]["nj"],
        log:
            LAYOUT.log("gmm_feats", "{set}/{j}"),
        benchmark:
            LAYOUT.benchmark("gmm_feats", "{set}/{j}")
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=from_dag("mem_mb", "gmm_feats"),  # paravg/resources.py
            runtime=from_dag("runtime", "gmm_feats"),
        script:
            "../scripts/gmm_stage.py"

    rule gmm_mono_init:
        input:
            lang=GMM.lang_files(),
            feats=GMM.feats(PARAVG.source_train_set, 1),
        output:
            model=GMM.model("mono", 0),
        params:
            lang_dir=lambda wildcards: GMM.lang_dir(),
            num_utts=10,  # train_mono.sh: gmm-init-mono on the first 10 utterances of job 1
        log:
            LAYOUT.log("gmm_mono_init", "mono"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=from_dag("mem_mb", "gmm_mono_init"),  # paravg/resources.py
            runtime=from_dag("runtime", "gmm_mono_init"),
        script:
            "../scripts/gmm_stage.py"

    rule gmm_align_equal:
        input:
            lang=GMM.lang_files(),
            model=GMM.model("mono", 0),
            feats=GMM.feats(PARAVG.source_train_set, "{j}"),
        output:
            ali=GMM.ali("mono", "equal", "{j}"),
        params:
            lang_dir=lambda wildcards: GMM.lang_dir(),
            text=GMM.text(PARAVG.source_train_set),
        log:
            LAYOUT.log("gmm_align_equal", "{j}"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=from_dag("mem_mb", "gmm_align_equal"),  # paravg/resources.py
            runtime=from_dag("runtime", "gmm_align_equal"),
        script:
            "../scripts/gmm_stage.py"

    # gmm-acc-stats-ali of job j with model x (fan-out)
    rule gmm_acc:
        input:
            unpack(from_dag("gmm.acc_inputs")),
        output:
            acc=temp(GMM.acc("{sys}", "{x}", "{j}")),
        wildcard_constraints:
            sys="mono|tri",
            x=r"\d+",
        log:
            LAYOUT.log("gmm_acc", "{sys}/{x}.{j}"),
        benchmark:
            LAYOUT.benchmark("gmm_acc", "{sys}/{x}.{j}")
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=from_dag("mem_mb", "gmm_acc"),  # paravg/resources.py
            runtime=from_dag("runtime", "gmm_acc"),
        script:
            "../scripts/gmm_stage.py"

    # gmm-sum-accs | gmm-est (+ mixup) -> model y (fan-in)
    rule gmm_est:
        input:
            unpack(from_dag("gmm.est_inputs")),
        output:
            model=GMM.model("{sys}", "{y}"),
        params:
            est=from_dag("gmm.est_params"),
        wildcard_constraints:
            sys="mono|tri",
            y=r"\d+",
        log:
            LAYOUT.log("gmm_est", "{sys}/{y}"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=from_dag("mem_mb", "gmm_est"),  # paravg/resources.py
            runtime=from_dag("runtime", "gmm_est"),
        script:
            "../scripts/gmm_stage.py"

    # gmm-boost-silence | gmm-align-compiled of job j with model x (the realign_iters)
    rule gmm_realign:
        input:
            unpack(from_dag("gmm.realign_inputs")),
        output:
            ali=GMM.ali("{sys}", "{x}", "{j}"),
        params:
            lang_dir=lambda wildcards: GMM.lang_dir(),
            text=GMM.text(PARAVG.source_train_set),
            align=from_dag("gmm.realign_params"),
        wildcard_constraints:
            sys="mono|tri",
            x=r"\d+",
        log:
            LAYOUT.log("gmm_realign", "{sys}/{x}.{j}"),
        benchmark:
            LAYOUT.benchmark("gmm_realign", "{sys}/{x}.{j}")
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=from_dag("mem_mb", "gmm_realign"),  # paravg/resources.py
            runtime=from_dag("runtime", "gmm_realign"),
        script:
            "../scripts/gmm_stage.py"

    # align_si.sh with the final monophone model (the tree's alignment)
    rule gmm_mono_align_si:
        input:
            lang=GMM.lang_files(),
            model=GMM.final_model("mono"),
            feats=GMM.feats(PARAVG.source_train_set, "{j}"),
        output:
            ali=GMM.ali("mono", "si", "{j}"),
        params:
            lang_dir=lambda wildcards: GMM.lang_dir(),
            text=GMM.text(PARAVG.source_train_set),
            align={
                "boost_silence": config["gmm"]["mono"]["boost_silence"],
                "beam": 10.0,
                "retry_beam": 40.0,
            },
        log:
            LAYOUT.log("gmm_mono_align_si", "{j}"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=from_dag("mem_mb", "gmm_mono_align_si"),  # paravg/resources.py
            runtime=from_dag("runtime", "gmm_mono_align_si"),
        script:
            "../scripts/gmm_stage.py"

    rule gmm_tree_acc:
        input:
            lang=GMM.lang_files(),
            model=GMM.final_model("mono"),
            feats=GMM.feats(PARAVG.source_train_set, "{j}"),
            ali=GMM.ali("mono", "si", "{j}"),
        output:
            stats=temp(GMM.tree_acc("{j}")),
        params:
            lang_dir=lambda wildcards: GMM.lang_dir(),
        log:
            LAYOUT.log("gmm_tree_acc", "{j}"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=from_dag("mem_mb", "gmm_tree_acc"),  # paravg/resources.py
            runtime=from_dag("runtime", "gmm_tree_acc"),
        script:
            "../scripts/gmm_stage.py"

    # sum-tree-stats, cluster-phones + compile-questions, build-tree, gmm-init-model + mixup
    rule gmm_tree:
        input:
            lang=GMM.lang_files(),
            stats=[GMM.tree_acc(j) for j in GMM.jobs()],
        output:
            **GMM.tree_files(),
        params:
            lang_dir=lambda wildcards: GMM.lang_dir(),
            num_leaves=config["gmm"]["tri"]["num_leaves"],
        log:
            LAYOUT.log("gmm_tree", "tri"),
        benchmark:
            LAYOUT.benchmark("gmm_tree", "tri")
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=from_dag("mem_mb", "gmm_tree"),  # paravg/resources.py
            runtime=from_dag("runtime", "gmm_tree"),
        script:
            "../scripts/gmm_stage.py"

    rule gmm_convert_ali:
        input:
            old=GMM.final_model("mono"),
            new=GMM.model("tri", 1),
            ali=GMM.ali("mono", "si", "{j}"),
        output:
            ali=GMM.ali("tri", "convert", "{j}"),
        log:
            LAYOUT.log("gmm_convert_ali", "{j}"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=from_dag("mem_mb", "gmm_convert_ali"),  # paravg/resources.py
            runtime=from_dag("runtime", "gmm_convert_ali"),
        script:
            "../scripts/gmm_stage.py"

    # align_si.sh with the final triphone model, for every set that needs targets
    rule gmm_align_set:
        input:
            unpack(from_dag("gmm.set_align_inputs")),
        output:
            ali=GMM.set_ali("{set}", "{j}"),
        params:
            lang_dir=lambda wildcards: GMM.lang_dir(),
            text=from_dag("gmm.text"),
            align={
                "boost_silence": config["gmm"]["tri"]["boost_silence"],
                "beam": 10.0,
                "retry_beam": 40.0,
            },
        log:
            LAYOUT.log("gmm_align_set", "{set}/{j}"),
        benchmark:
            LAYOUT.benchmark("gmm_align_set", "{set}/{j}")
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=from_dag("mem_mb", "gmm_align_set"),  # paravg/resources.py
            runtime=from_dag("runtime", "gmm_align_set"),
        script:
            "../scripts/gmm_stage.py"

    # ali-to-pdf -> <results>/gmm/data/<set>: the set's tables and targets.ark (the source
    # dir of its prepare_data)
    rule gmm_targets:
        input:
            unpack(from_dag("gmm.targets_inputs")),
        output:
            GMM.targets_outputs(),
        params:
            src=from_dag("gmm.source_dir"),
        log:
            LAYOUT.log("gmm_targets", "{set}"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        resources:
            mem_mb=from_dag("mem_mb", "gmm_targets"),  # paravg/resources.py
            runtime=from_dag("runtime", "gmm_targets"),
        script:
            "../scripts/gmm_stage.py"

    if PARAVG.chain.on_lang:

        # ali-to-phones --per-frame of a set's final alignment: the lang's phone ids, the
        # frame labels of a chain experiment (chain_den, chain_sup, its evaluation):
        # Kaldi's chain recipes build the chain tree, phone LM and supervision from the
        # GMM alignments (docs/chain.md)
        rule gmm_phones:
            input:
                unpack(from_dag("gmm.phones_inputs")),
            output:
                **GMM.phones_outputs(),
            wildcard_constraints:
                set=PARAVG.data.prepared_set_pattern(),  # not the perturbed set's copies
            log:
                LAYOUT.log("gmm_phones", "{set}"),
            conda:
                "../envs/paravg.yaml"
            threads: 1
            resources:
                mem_mb=from_dag("mem_mb", "gmm_phones"),  # paravg/resources.py
                runtime=from_dag("runtime", "gmm_phones"),
            script:
                "../scripts/gmm_stage.py"

    if RECOGNITION.enabled:

        # mkgraph.sh for the GMM path: H (the triphone transition model) ∘ C (the tree's
        # context) ∘ L ∘ G (the training text's bigram) -> results/graph/words, which the
        # decoder and the export read as any word graph
        rule graph_gmm_words:
            input:
                lang=GMM.lang_files(),
                model=GMM.final_model("tri"),
                tree=GMM.tree_files()["tree"],
                source=GMM.set_inputs(PARAVG.source_train_set),
            output:
                RECOGNITION.graph_outputs("words"),
            params:
                lang_dir=lambda wildcards: GMM.lang_dir(),
                text=GMM.text(PARAVG.source_train_set),
                out_dir=layout_param("graph_dir", "words"),
                options=RECOGNITION.graph_options(),
            log:
                LAYOUT.log("graph", "gmm_words"),
            benchmark:
                LAYOUT.benchmark("graph", "gmm_words")
            conda:
                "../envs/paravg.yaml"
            threads: 1  # OpenFst operations are single-threaded
            resources:
                mem_mb=4000,
                runtime=30,
            script:
                "../scripts/gmm_stage.py"

        if PARAVG.chain.on_lang:

            # the chain experiments' word graph on the GMM lang: mkgraph.sh
            # --self-loop-scale 1.0 with the chain tree (<egs>/chain/tree: left-biphone by
            # default) and the chain topology over the lang's phones, L from the lexicon, G
            # the training text's bigram (paravg.chain.graph) -> results/graph/chain_words
            rule graph_gmm_chain_words:
                input:
                    lang=GMM.lang_files(),
                    chain_tree=PARAVG.chain.tree_file(),
                    chain_info=PARAVG.chain.den_files()["info_json"],
                    source=GMM.set_inputs(PARAVG.source_train_set),
                output:
                    RECOGNITION.graph_outputs("chain_words"),
                params:
                    lang_dir=lambda wildcards: GMM.lang_dir(),
                    text=GMM.text(PARAVG.source_train_set),
                    out_dir=layout_param("graph_dir", "chain_words"),
                    options=RECOGNITION.chain_graph_options(),
                log:
                    LAYOUT.log("graph", "gmm_chain_words"),
                benchmark:
                    LAYOUT.benchmark("graph", "gmm_chain_words")
                conda:
                    "../envs/paravg.yaml"
                threads: 1  # OpenFst operations are single-threaded
                resources:
                    mem_mb=4000,
                    runtime=30,
                script:
                    "../scripts/gmm_stage.py"
