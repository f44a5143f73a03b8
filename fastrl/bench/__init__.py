"""``python -m fastrl.bench``: steps/sec and steps per CPU-second of fastrl and its peers,
measured in the same run."""
