"""PettingZoo-style env modules for tests, named as env ids ("scripted_pz.<name>")."""
