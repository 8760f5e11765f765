"""Process configuration: settings from the environment and the database they name."""

VERSION = "0.9.0"  # this release of Omniflow, as telemetry heartbeats report it (ops/telemetry.py)
