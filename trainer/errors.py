"""The trainer's one error type for problems the user can fix (kept apart so every trainer module can raise it
without importing the training loop)."""


class TrainingError(RuntimeError):
    """A problem the user can fix (bad run folder, mismatched config); printed without a traceback."""
