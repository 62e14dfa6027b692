from gpugap.cli import main

raise SystemExit(main())
