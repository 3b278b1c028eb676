"""kickmodel: the kick models' runtime, what a served model is and does.

Config, the artifact format, the render contract (`KickGenerator`), samplers, the families' networks and
generators, clip preparation and descriptors. The daemon (`kickserver`) imports only this package; the
trainer (`trainer`) imports it to build, train and export models. Nothing here imports the trainer or a
training-only library (tensorboard, matplotlib, scikit-learn).
"""

__version__ = "0.1.0"
