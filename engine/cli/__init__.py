"""The command line, `python -m engine run|generate|sweep|trace`."""
