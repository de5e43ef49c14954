# features stage rules: hires MFCC per split job (fan-out over features.nj), merged into
# one feats.scp (pointing into the split arks), then per-speaker CMVN stats.
# Kaldi: steps/make_mfcc.sh + steps/compute_cmvn_stats.sh.


rule compute_features:
    input:
        wav_scp=LAYOUT.data_file("{set}", "wav.scp"),
        utt2spk=LAYOUT.data_file("{set}", "utt2spk"),
        spk2utt=LAYOUT.data_file("{set}", "spk2utt"),
        origin=LAYOUT.data_file("{set}", "origin"),
        report=LAYOUT.data_file("{set}", "report.json"),
        # every configured set is prepared and checked before any feature job starts
        sets_checked=ancient(LAYOUT.data_sets_checked()),
    output:
        ark=LAYOUT.feats_split("{set}", "{nj}", "{j}", "ark"),
        scp=LAYOUT.feats_split("{set}", "{nj}", "{j}", "scp"),
        utt2num_frames=LAYOUT.feats_split("{set}", "{nj}", "{j}", "utt2num_frames"),
        report=LAYOUT.feats_split("{set}", "{nj}", "{j}", "report"),
    wildcard_constraints:
        nj=r"\d+",
    params:
        data_dir=from_dag("layout.data_dir"),  # the prepared data dir (wav.scp, segments)
        features=config["features"],
        sample_rate=config["data"]["sample_rate"],
    log:
        LAYOUT.log("compute_features", "{set}.{nj}.{j}"),
    benchmark:
        LAYOUT.benchmark("compute_features", "{set}.{nj}.{j}")
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # knf is single-threaded; one recording is in memory at a time (1 h of 16 kHz audio =
    # 230 MB float32). Runs at several hundred x real time per core, so an hour of the
    # set's audio per job takes well under a minute; 60 min leaves room for slow pipes.
    resources:
        mem_mb=from_dag("mem_mb", "compute_features"),  # paravg/resources.py
        runtime=from_dag("runtime", "compute_features"),
    script:
        "../scripts/compute_features.py"


rule merge_features:
    input:
        scps=expand(
            LAYOUT.feats_split("{set}", "{nj}", "{j}", "scp"),
            nj=config["features"]["nj"],
            j=range(1, config["features"]["nj"] + 1),
            allow_missing=True,
        ),
        utt2num_frames=expand(
            LAYOUT.feats_split("{set}", "{nj}", "{j}", "utt2num_frames"),
            nj=config["features"]["nj"],
            j=range(1, config["features"]["nj"] + 1),
            allow_missing=True,
        ),
        reports=expand(
            LAYOUT.feats_split("{set}", "{nj}", "{j}", "report"),
            nj=config["features"]["nj"],
            j=range(1, config["features"]["nj"] + 1),
            allow_missing=True,
        ),
        # target lengths are checked against the features here, naming the user's line
        targets_scp=LAYOUT.data_file("{set}", "targets.scp"),
        origin=LAYOUT.data_file("{set}", "origin"),
        data_report=LAYOUT.data_file("{set}", "report.json"),
    output:
        feats_scp=LAYOUT.feats_scp("{set}"),
        utt2num_frames=LAYOUT.utt2num_frames("{set}"),
        report=LAYOUT.feats_file("{set}", "report.json"),
    params:
        data_dir=from_dag("layout.data_dir"),
        targets_length_tolerance=config["egs"]["targets_length_tolerance"],
    log:
        LAYOUT.log("merge_features", "{set}"),
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # Streams the splits' text files and the set's targets (one vector at a time),
    # joined as they are read: nothing held per utterance.
    resources:
        mem_mb=from_dag("mem_mb", "merge_features"),  # paravg/resources.py
        runtime=from_dag("runtime", "merge_features"),
    script:
        "../scripts/merge_features.py"


rule compute_cmvn:
    input:
        feats_scp=LAYOUT.feats_scp("{set}"),
        spk2utt=LAYOUT.data_file("{set}", "spk2utt"),
    output:
        ark=LAYOUT.feats_file("{set}", "cmvn.ark"),
        scp=LAYOUT.feats_file("{set}", "cmvn.scp"),
    log:
        LAYOUT.log("compute_cmvn", "{set}"),
    benchmark:
        LAYOUT.benchmark("compute_cmvn", "{set}")
    conda:
        "../envs/paravg.yaml"
    threads: 1
    # Reads every feature matrix once, one utterance at a time (I/O bound).
    resources:
        mem_mb=from_dag("mem_mb", "compute_cmvn"),  # paravg/resources.py
        runtime=from_dag("runtime", "compute_cmvn"),
    script:
        "../scripts/compute_cmvn.py"
