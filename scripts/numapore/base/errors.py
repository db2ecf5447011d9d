"""The errors a user's input causes: reported as one `numapore:` line, never as a traceback."""


class InputError(ValueError):
    """A user input (sample sheet, reads, FAST5, reference) that cannot be used, with the reason."""


class AccountingError(Exception):
    """The read counts do not reconcile (or an input cannot be read); the message says which."""
