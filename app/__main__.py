"""`python -m app ...`: see app.cli (it parses the command line before anything else loads)."""
import sys

from app.cli import main

sys.exit(main())
