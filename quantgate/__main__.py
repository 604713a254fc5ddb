from quantgate.cli import main

raise SystemExit(main())
