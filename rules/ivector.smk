# i-vector stage (Kaldi steps/online/nnet2): PCA -> diagonal UBM EM -> extractor EM ->
# online i-vectors per set. Both EM loops have the shape of training: per iteration `it`,
# ivector.nj accumulation jobs (fan-out, temp accumulators) and one estimation job
# (fan-in) that writes model it+1. Jobs are numbered 1..nj; model files follow Kaldi's
# numbering (<name>.<it>: the model at the start of iteration it).

if PARAVG.ivector.enabled:

    IV = config["ivector"]

    if IV["ubm_subset_utts"]:

        # utils/subset_data_dir.sh <train> <ubm_subset_utts>: the PCA's and UBM's data.
        rule ubm_subset:
            input:
                unpack(from_dag("ivector.train_data")),
                cmvn=LAYOUT.feats_file(PARAVG.train_set, "cmvn.scp"),
            output:
                feats=LAYOUT.ubm_subset("feats.scp"),
                spk2utt=LAYOUT.ubm_subset("spk2utt"),
                cmvn=LAYOUT.ubm_subset("cmvn.scp"),
            params:
                num_utts=IV["ubm_subset_utts"],
            log:
                LAYOUT.log("ubm_subset", "ubm"),
            conda:
                "../envs/paravg.yaml"
            threads: 1
            resources:
                mem_mb=from_dag("mem_mb", "ubm_subset"),  # paravg/resources.py
                runtime=from_dag("runtime", "ubm_subset"),
            script:
                "../scripts/ubm_subset.py"

    rule ivector_pca:
        input:
            feats=PARAVG.ivector.ubm_data()["feats"],
            cmvn=PARAVG.ivector.pca_cmvn(),
        output:
            pca=LAYOUT.ivector_pca(),
        params:
            dim=IV["pca_dim"],
            context=IV["splice"],
            max_utts=IV["pca_max_utts"],
            subsample=IV["pca_subsample"],
        log:
            LAYOUT.log("ivector_pca", "pca"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        # Reads each utterance once; holds one (2c+1)D x (2c+1)D scatter matrix.
        resources:
            mem_mb=from_dag("mem_mb", "ivector_pca"),  # paravg/resources.py
            runtime=from_dag("runtime", "ivector_pca"),
        script:
            "../scripts/ivector_pca.py"

    rule ubm_init:
        input:
            unpack(from_dag("ivector.ubm_data")),
            pca=rules.ivector_pca.output.pca,
        output:
            ubm=LAYOUT.ubm(0),
            info=LAYOUT.ubm(0, "json"),
        params:
            num_gauss=IV["num_gauss"],
            num_iters_init=IV["ubm_num_iters_init"],
            num_frames=IV["ubm_num_frames"],
            subsample=IV["subsample"],
            srand=IV["srand"],
        log:
            LAYOUT.log("ubm_init", "ubm"),
        benchmark:
            LAYOUT.benchmark("ubm_init", "ubm")
        conda:
            "../envs/paravg.yaml"
        threads: 1
        # Holds ubm_num_frames x pca_dim doubles (500k x 40 = 160 MB) plus one E-step
        # block of frames x Gaussians temporaries (at most 256 MiB, ubm.BLOCK_BYTES):
        # mem_mb from paravg/resources.py.
        resources:
            mem_mb=from_dag("mem_mb", "ubm_init"),  # paravg/resources.py
            runtime=from_dag("runtime", "ubm_init"),
        script:
            "../scripts/ubm_init.py"

    rule ubm_gselect:
        input:
            unpack(from_dag("ivector.ubm_data")),
            pca=rules.ivector_pca.output.pca,
            ubm=rules.ubm_init.output.ubm,
        output:
            gselect=temp(LAYOUT.ubm_gselect("{j}")),
        params:
            job=from_dag("ivector.job_index"),
            nj=IV["nj"],
            num_gselect=IV["num_gselect"],
            subsample=IV["subsample"],
        log:
            LAYOUT.log("ubm_gselect", "{j}"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        # One utterance at a time; the index table (frames x num_gselect int32) is
        # written in chunks of 50,000 frames (frame_table.CHUNK_FRAMES: 6 MB).
        resources:
            mem_mb=from_dag("mem_mb", "ubm_gselect"),  # paravg/resources.py
            runtime=from_dag("runtime", "ubm_gselect"),
        script:
            "../scripts/ubm_gselect.py"

    rule ubm_acc:
        input:
            unpack(from_dag("ivector.ubm_data")),
            pca=rules.ivector_pca.output.pca,
            ubm=LAYOUT.ubm("{it}"),
            gselect=LAYOUT.ubm_gselect("{j}"),
        output:
            acc=temp(LAYOUT.ubm_acc("{it}", "{j}")),
        params:
            job=from_dag("ivector.job_index"),
            nj=IV["nj"],
            subsample=IV["subsample"],
        log:
            LAYOUT.log("ubm_acc", "{it}.{j}"),
        benchmark:
            LAYOUT.benchmark("ubm_acc", "{it}.{j}")
        conda:
            "../envs/paravg.yaml"
        threads: 1
        # One utterance at a time plus one chunk of the job's gselect table.
        resources:
            mem_mb=from_dag("mem_mb", "ubm_acc"),  # paravg/resources.py
            runtime=from_dag("runtime", "ubm_acc"),
        script:
            "../scripts/ubm_acc.py"

    rule ubm_est:
        input:
            unpack(from_dag("ivector.ubm_est_inputs")),
        output:
            ubm=LAYOUT.ubm("{it}"),
            info=LAYOUT.ubm("{it}", "json"),
        wildcard_constraints:
            it=r"[1-9]\d*",
        params:
            # Gaussians are removed on the last pass only, so gselect indices stay valid.
            remove_low_count=from_dag("ivector.ubm_removes_low_count"),
        log:
            LAYOUT.log("ubm_est", "{it}"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        # nj accumulators of Gaussians x dim doubles.
        resources:
            mem_mb=from_dag("mem_mb", "ubm_est"),  # paravg/resources.py
            runtime=from_dag("runtime", "ubm_est"),
        script:
            "../scripts/ubm_est.py"

    rule extractor_init:
        input:
            ubm=PARAVG.ivector.final_ubm(),
        output:
            extractor=LAYOUT.extractor(0),
        params:
            dim=IV["dim"],
            srand=IV["srand"],
        log:
            LAYOUT.log("extractor_init", "extractor"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        # Gaussians x (dim x ivector_dim + dim x dim) doubles (512 x 5600 x 8 B = 23 MB).
        resources:
            mem_mb=from_dag("mem_mb", "extractor_init"),  # paravg/resources.py
            runtime=from_dag("runtime", "extractor_init"),
        script:
            "../scripts/extractor_init.py"

    rule extractor_post:
        input:
            unpack(from_dag("ivector.train_data")),
            pca=rules.ivector_pca.output.pca,
            ubm=PARAVG.ivector.final_ubm(),
        output:
            post=temp(LAYOUT.extractor_post("{j}")),
        params:
            job=from_dag("ivector.job_index"),
            nj=IV["nj"],
            subsample=IV["subsample"],
            num_gselect=IV["num_gselect_post"],
            min_post=IV["min_post"],
            posterior_scale=IV["posterior_scale"],
        log:
            LAYOUT.log("extractor_post", "{j}"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        # Posteriors are computed once (Kaldi too) and kept for every EM iteration,
        # written in chunks of 50,000 frames (frame_table.CHUNK_FRAMES).
        resources:
            mem_mb=from_dag("mem_mb", "extractor_post"),  # paravg/resources.py
            runtime=from_dag("runtime", "extractor_post"),
        script:
            "../scripts/extractor_post.py"

    rule extractor_acc:
        input:
            unpack(from_dag("ivector.train_data")),
            pca=rules.ivector_pca.output.pca,
            extractor=LAYOUT.extractor("{it}"),
            post=LAYOUT.extractor_post("{j}"),
        output:
            acc=temp(LAYOUT.extractor_acc("{it}", "{j}")),
        params:
            job=from_dag("ivector.job_index"),
            nj=IV["nj"],
            subsample=IV["subsample"],
        log:
            LAYOUT.log("extractor_acc", "{it}.{j}"),
        benchmark:
            LAYOUT.benchmark("extractor_acc", "{it}.{j}")
        conda:
            "../envs/paravg.yaml"
        threads: 1
        # Stats: Gaussians x (dim x ivector_dim + ivector_dim^2 + dim^2) doubles
        # (Kaldi's 512 x 100 x 40 extractor: about 70 MB), one chunk of posteriors.
        resources:
            mem_mb=from_dag("mem_mb", "extractor_acc"),  # paravg/resources.py
            runtime=from_dag("runtime", "extractor_acc"),
        script:
            "../scripts/extractor_acc.py"

    rule extractor_est:
        input:
            unpack(from_dag("ivector.extractor_est_inputs")),
        output:
            extractor=LAYOUT.extractor("{it}"),
            info=LAYOUT.extractor("{it}", "json"),
        wildcard_constraints:
            it=r"[1-9]\d*",
        params:
            gaussian_min_count=IV["gaussian_min_count"],
        log:
            LAYOUT.log("extractor_est", "{it}"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        # nj accumulators in memory at once (see extractor_acc).
        resources:
            mem_mb=from_dag("mem_mb", "extractor_est"),  # paravg/resources.py
            runtime=from_dag("runtime", "extractor_est"),
        script:
            "../scripts/extractor_est.py"

    rule extract_ivectors:
        input:
            unpack(from_dag("ivector.set_inputs")),
            pca=rules.ivector_pca.output.pca,
            ubm=PARAVG.ivector.final_ubm(),
            extractor=PARAVG.ivector.final_extractor(),
        output:
            ark=LAYOUT.ivector_split("{set}", "{j}", "ark"),
            scp=temp(LAYOUT.ivector_split("{set}", "{j}", "scp")),
        params:
            job=from_dag("ivector.job_index"),
            nj=IV["nj"],
            utts_per_spk_max=from_dag("ivector.utts_per_spk_max"),
            online=PARAVG.ivector.online_options(),
        log:
            LAYOUT.log("extract_ivectors", "{set}.{j}"),
        benchmark:
            LAYOUT.benchmark("extract_ivectors", "{set}.{j}")
        conda:
            "../envs/paravg.yaml"
        threads: 1
        # One utterance at a time; the model is small.
        resources:
            mem_mb=from_dag("mem_mb", "extract_ivectors"),  # paravg/resources.py
            runtime=from_dag("runtime", "extract_ivectors"),
        script:
            "../scripts/extract_ivectors.py"

    rule merge_ivectors:
        input:
            scps=from_dag("ivector.pieces"),
        output:
            scp=LAYOUT.ivector_scp("{set}"),
            period=LAYOUT.ivector_period("{set}"),
        params:
            period=IV["period"],
        log:
            LAYOUT.log("merge_ivectors", "{set}"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        # Concatenates small text files.
        resources:
            mem_mb=from_dag("mem_mb", "merge_ivectors"),  # paravg/resources.py
            runtime=from_dag("runtime", "merge_ivectors"),
        script:
            "../scripts/merge_ivectors.py"
