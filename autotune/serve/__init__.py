"""The Ray Serve side of a trial: the deployment whose replica runs one engine server (``app``), and the adapter
through which the trial runner deploys it and talks to it (``handle``). Importing this package imports no Ray."""
