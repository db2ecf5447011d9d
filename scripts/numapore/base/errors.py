"""The errors a user's input causes: reported as one `numapore:` line, never as a traceback."""


class InputError(ValueError):
    """A user input (sample sheet, reads, FAST5, reference) that cannot be used, with the reason."""


class AccountingError(Exception):
    """The read counts do not reconcile (or an input cannot be read); the message says which."""


class EmptySample(InputError):
    """A sample none of whose reads can be used (no raw signal, none mapped, no call): its main
    output would be empty."""


ALLOW_EMPTY = "allow_empty_samples: true"  # the config setting that lets such a sample pass


def empty_sample(sample: str, reason: str, allowed: bool) -> None:
    """Stop on a sample whose main output would be empty (EmptySample: the sample, the reason
    and how to let it pass), or, when the config allows empty samples, say it on the job's log
    and go on (the run's closing lines list it: numapore.report.empty)."""
    if not allowed:
        raise EmptySample(f"sample '{sample}': {reason} (to run it anyway: {ALLOW_EMPTY})")
    print(f"numapore: sample '{sample}': {reason} ({ALLOW_EMPTY}: going on)", flush=True)
