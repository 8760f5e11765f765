"""The web process: Bottle apps behind a production WSGI server (waitress).

web and bot only insert jobs; they never execute them (SPEC 0.3).
"""
