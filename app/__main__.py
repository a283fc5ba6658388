"""`python -m app [--host H] [--port P] [--model PATH] [--async-mode threading|eventlet] [--data DIR]`."""
import sys

_args = sys.argv[1:]
if "--async-mode=eventlet" in _args or ("--async-mode", "eventlet") in zip(_args, _args[1:]):
    import eventlet  # must patch the standard library before anything else imports it

    eventlet.monkey_patch()

from app.cli import main  # noqa: E402

sys.exit(main())
