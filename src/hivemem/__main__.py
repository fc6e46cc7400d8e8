"""python -m hivemem → the CLI."""

from hivemem.cli import main

raise SystemExit(main())
