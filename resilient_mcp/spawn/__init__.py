"""Starting a stdio server's process: its environment, the watchdog that outlives a killed proxy, and the early start
of ``wrap`` (``prestart``). A leaf: imports nothing of the package, so it runs before the rest is loaded."""
