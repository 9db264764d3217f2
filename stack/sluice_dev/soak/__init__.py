"""The chaos soak of ``make soak`` (``sluice-dev soak``): a pipeline on the local stack
fed by a transactional producer while seeded faults hit every part of the system,
ending with the checks a user makes and the time each fault took to recover.

Pure decisions (:mod:`.schedule`, :mod:`.ledger`, :mod:`.recovery`, :mod:`.checks`,
:mod:`.report`, :mod:`.manifest`) are kept apart from the modules that do I/O
(:mod:`.producer`, :mod:`.store`, :mod:`.kafka`, :mod:`.cluster`, :mod:`.faults`)
and from the run that strings them together (:mod:`.run`).
"""
