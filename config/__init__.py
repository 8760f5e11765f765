"""Process configuration: settings from the environment and the database they name."""
