from recloop._cli import main

raise SystemExit(main())
