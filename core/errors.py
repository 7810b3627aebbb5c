"""The error a command reports as one clear message (exit 1), never as a traceback."""


class StreamsimError(RuntimeError):
    """A failure the user can act on; the message says what happened and what to do."""
