"""Export a paravg model to Kaldi's formats, for Kaldi's decoders and vosk.

* :mod:`.kaldi_stream`: Kaldi's text/binary serialisation (tokens, numbers, matrices);
* :mod:`.nnet3`: the TDNN as an nnet3 network (write, read back, compute);
* :mod:`.transition_model`: Kaldi's ``TransitionModel`` (read, write);
* :mod:`.final_mdl`: ``final.mdl`` = TransitionModel + ``AmNnetSimple`` with priors;
* :mod:`.ivector_files`: the online i-vector extractor in Kaldi's files;
* :mod:`.conf`: ``mfcc.conf``, ``model.conf``, ``online.conf``, ``ivector_extractor.conf``;
* :mod:`.layout`: the exported directory (what ``online2-wav-nnet3-latgen-faster`` and
  vosk read) and :func:`.layout.export_model`;
* ``python -m paravg.export``: the command line.
"""
