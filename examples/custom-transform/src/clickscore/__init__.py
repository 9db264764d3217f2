"""clickscore: an example of a user's Sluice transform shipped in its own image.

``clickscore.transform:transform`` is the entrypoint a pipeline names; the rules it
applies to each event live in :mod:`clickscore.scoring`, plain Python.
"""
