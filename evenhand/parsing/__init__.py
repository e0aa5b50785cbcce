"""The parsing floor: which of two candidates an answer chose.

- ``parse``: ``"A"``, ``"B"`` or ``None`` from an answer's text; ``parse_words``: its vocabulary of nouns,
  verdicts, refusals and concessions.
"""
