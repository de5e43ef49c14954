# data stage rules


# ---------------------------------------------------------------- demo_corpus (corpus helper)
# Synthesize the labelled demo corpus (paravg.corpus): TTS voices x variants = speakers,
# train/test(/dev) split by source voice, per-frame phone targets from the engines' timing.
# Used while data.sets does not name data.train_set. Also writes wav/, targets.{ark,scp}, text, phone_ctm.
rule demo_corpus:
    output:
        **PARAVG.data.demo_wav_scps(),
        done=LAYOUT.demo_file("done"),
    params:
        minutes=config["demo"]["minutes"],
        test_fraction=config["demo"]["test_fraction"],
        dev_fraction=config["demo"]["dev_fraction"],
        variants=config["demo"]["variants"],
        use_espeak=config["demo"]["use_espeak"],
        seed=config["demo"]["seed"],
    log:
        LAYOUT.log("demo_corpus", "demo"),
    benchmark:
        LAYOUT.benchmark("demo_corpus", "demo")
    conda:
        "../envs/paravg.yaml"
    # One TTS process per worker; 20 minutes of audio take ~30 s on 2 cores.
    threads: 2
    # ~350 MB peak (all targets and segments of the corpus in memory; ~10 MB per minute
    # of audio at most); runtime in minutes, generous for a 60-minute corpus.
    resources:
        mem_mb=2000,
        runtime=30,
    script:
        "../scripts/demo_corpus.py"


# ---------------------------------------------------------------- lhotse_to_kaldi (manifest sets)
# A set of data.sets given as lhotse manifests (recordings/supervisions.jsonl[.gz] beside
# a targets file; paravg.lhotse) becomes a Kaldi data dir under results/lhotse/<set>,
# every manifest error naming its file and line; prepare_data then reads that dir.
if PARAVG.data.lhotse_sets():

    rule lhotse_to_kaldi:
        input:
            from_dag("data.manifest_inputs"),
        output:
            PARAVG.data.converted_files("{set}"),  # wav.scp, utt2spk, report.json
        wildcard_constraints:
            set=PARAVG.data.lhotse_set_pattern(),
        params:
            src=lambda wc: config["data"]["sets"][wc.set],
            dst=lambda wc: PARAVG.data.converted_dir(wc.set),
            sample_rate=config["data"]["sample_rate"],
        log:
            LAYOUT.log("lhotse_to_kaldi", "{set}"),
        conda:
            "../envs/paravg.yaml"
        threads: 1
        # The manifests' lines (a few hundred bytes per supervision); headers only.
        resources:
            mem_mb=2000,
            runtime=60,
        script:
            "../scripts/lhotse_to_kaldi.py"


# ---------------------------------------------------------------- prepare_data (features helper)
# Validate a Kaldi data dir (tables, targets, audio headers) and write the normalised copy
# every later stage reads. Pipes in wav.scp are run by the feature stage, not here.
# Every file it reads is an input (an edit reruns it); the outputs are written to a
# temporary dir that replaces results/data/<set> at the end (nothing stale survives an
# error). segments, text and reco2file_and_channel are copied when the source has them.
rule prepare_data:
    input:
        source=from_dag("data.source_inputs"),
    output:
        wav_scp=LAYOUT.data_file("{set}", "wav.scp"),
        utt2spk=LAYOUT.data_file("{set}", "utt2spk"),
        spk2utt=LAYOUT.data_file("{set}", "spk2utt"),
        utt2uniq=LAYOUT.data_file("{set}", "utt2uniq"),
        targets_ark=LAYOUT.data_file("{set}", "targets.ark"),
        targets_scp=LAYOUT.data_file("{set}", "targets.scp"),
        origin=LAYOUT.data_file("{set}", "origin"),
        report=LAYOUT.data_file("{set}", "report.json"),
    wildcard_constraints:
        set=PARAVG.data.prepared_set_pattern(),  # not the perturbed set (perturb_data)
    params:
        data_dir=from_dag("layout.data_dir"),  # where the prepared set is written
        src=from_dag("data.source_dir"),
        sample_rate=config["data"]["sample_rate"],
        max_missing_fraction=config["data"]["max_missing_targets_fraction"],
        num_targets=config["data"]["num_targets"],
    log:
        LAYOUT.log("prepare_data", "{set}"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # The set's text tables are held for the cross-checks (~1.6 KB per utterance); the
    # targets are streamed twice (checks, then the kept ones in order), held only when the
    # targets file is out of utterance order; audio is only header-checked.
    resources:
        mem_mb=from_dag("mem_mb", "prepare_data"),  # paravg/resources.py
        runtime=from_dag("runtime", "prepare_data"),
    script:
        "../scripts/prepare_data.py"


# ---------------------------------------------------------------- perturb_data (data.perturb)
# Kaldi's utils/data/perturb_data_dir_speed_3way.sh + perturb_data_dir_volume.sh as one
# job (paravg.perturb): the prepared training set's copies (audio resampled and scaled
# into one WAV archive, ids prefixed sp<f>-, utt2uniq, targets stretched to the copies'
# frames), written to a temporary dir that replaces results/data/<train>_sp at the end.
if PARAVG.data.perturbed_set():

    rule perturb_data:
        input:
            **PARAVG.data.perturb_inputs(),
        output:
            **PARAVG.data.perturb_outputs(),
        params:
            src=LAYOUT.data_dir(PARAVG.source_train_set),
            dst=LAYOUT.data_dir(PARAVG.data.perturbed_set()),
            perturb=config["data"]["perturb"],
            sample_rate=config["data"]["sample_rate"],
            snip_edges=config["features"]["snip_edges"],  # the copies' frame counts
        log:
            LAYOUT.log("perturb_data", PARAVG.data.perturbed_set()),
        benchmark:
            LAYOUT.benchmark("perturb_data", PARAVG.data.perturbed_set())
        conda:
            "../envs/paravg.yaml"
        threads: 1
        # One recording and its copies in memory (float64: 8 bytes a sample, ~4 copies),
        # plus every target vector of the set (~100 bytes per frame in the worst case).
        resources:
            mem_mb=4000,
            runtime=240,
        script:
            "../scripts/perturb_data.py"


# ---------------------------------------------------------------- check_data_sets (the gate)
# Every configured set prepared and checked: every feature job waits for this file as an
# ancient input (one fixed path, so neither its new content nor a new set in its inputs
# reruns a feature job). A bad set therefore fails in the first seconds, before any
# feature or i-vector job, while adding, removing or editing a set reruns only that set's
# own work (and this rule).
rule check_data_sets:
    input:
        unpack(from_dag("data.prepared_reports")),
    output:
        LAYOUT.data_sets_checked(),
    log:
        LAYOUT.log("check_data_sets", "all"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=5,
    script:
        "../scripts/check_data_sets.py"
