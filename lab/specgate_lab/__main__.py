"""`python -m specgate_lab`: the lab's CLI (specgate_lab.cli)."""

from specgate_lab.cli import main

raise SystemExit(main())
