"""`python -m engine ...`: see engine.cli. The compute threads are set up before anything loads torch."""
from .threads import configure

configure()
from .cli import main  # noqa: E402  (after configure: cli loads torch)

raise SystemExit(main())
