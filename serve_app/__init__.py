"""Ray Serve application that owns one engine server (SGLang or the simulator) per deployment replica."""
