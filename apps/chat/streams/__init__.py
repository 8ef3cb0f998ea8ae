"""Where a running turn publishes its frames and transports read them: the frame shapes and the buses (in-process, Redis)."""
