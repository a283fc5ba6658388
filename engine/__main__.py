"""`python -m engine ...`: see engine.cli.commands. The compute threads are set up before anything loads torch."""
from engine.threads import configure

configure()
from engine.cli.commands import main  # noqa: E402  (after configure: cli loads torch)

raise SystemExit(main())
