"""The one exception type that means "the user asked for something we cannot do".

Every layer raises UserError with one clear sentence; the CLI turns it into that sentence on
stderr and exit code 2. Anything else is a bug and keeps its traceback.
"""


class UserError(Exception):
    """Bad input: an unknown agent, a wrong count, a corrupt checkpoint, a database at the wrong schema."""
