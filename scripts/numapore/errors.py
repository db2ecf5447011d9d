"""The error a user's input causes: reported as one `numapore:` line, never as a traceback."""


class InputError(ValueError):
    """A user input (sample sheet, reads, FAST5, reference) that cannot be used, with the reason."""
