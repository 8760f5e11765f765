"""Test support: backends, worker processes and the job kinds tests run."""
