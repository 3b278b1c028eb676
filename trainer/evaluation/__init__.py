"""The parts of `kicktrain eval` (trainer/evaluate.py: the command, and what each figure means):

- sets.py: the clips an evaluation looks at: real held-out and training clips, each model's kicks, the synth
  baseline's;
- distances.py: FAD, KID, novelty, diversity between sets of embeddings, and the standardiser;
- measures.py: tail hiss, end level and body haze, measured on the waveforms;
- scoring.py: the splits, every set against the same real reference, the recommended step count;
- report.py: the text table, the report made JSON-safe, the pictures.

The waveform cross-correlation that counts copies of training kicks is trainer/xcorr.py, shared with the
held-out split (trainer/split.py).
"""
