"""Errors that carry a message meant for the user, not a traceback."""


class InputError(Exception):
    """Bad user input (dataset, config, model path): the message names where."""
