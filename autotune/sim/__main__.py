from autotune.sim.server import main

raise SystemExit(main())
