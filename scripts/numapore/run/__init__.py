"""One workflow run: atomic outputs, rule logging, the working directory (resume, full or
read-only disk), read accounting and the run report."""
