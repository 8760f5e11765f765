"""Commerce services: settling and refunding orders."""
