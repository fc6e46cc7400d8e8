"""python -m hivemem → the CLI."""

from hivemem.cli.main import main

raise SystemExit(main())
