"""Stand-ins for the services Omniflow calls, real servers on 127.0.0.1 for tests and development."""
