"""Data: corpora read from files or by name, turned into the token batches training reads.

    download             built-in corpus files: sources, local lookup, verified download
    textfiles            reading text: corpus files (gzipped or not), sentences from a file or stdin
    synthetic            generated translation tasks, offline, for tests, demos and sanity checks
    parallel_files       parallel text in files and TSV: the user's own corpora
    distillation_record  a distilled corpus's record: its teacher, its search, who may read it
    pair_filters         which training pairs a corpus keeps: subset, held-out sources, lengths
    splits               the raw-text train, valid and test sets every corpus becomes
    corpora              the corpora known by name, and the one door to every corpus
    binarized            a corpus side's token ids on disk, memory-mapped
    prepare              a corpus encoded once and memory-mapped after: what training reads
    batching             token ids -> length-bucketed token batches
    shares               a training process's batches: its share of each, resegmented, collated, made ahead
    mixing               the starting run's data mixed into a continued run's batches
    stats                what a config's data looks like: pairs, lengths, coverage, padding

Import from the modules themselves: this package's own module imports nothing, so its light
parts stay light.
"""
