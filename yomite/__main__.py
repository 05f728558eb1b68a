"""`python -m yomite`: the same as the `yomite` command."""

from yomite.cli import main

raise SystemExit(main())
