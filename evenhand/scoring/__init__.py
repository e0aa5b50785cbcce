"""The scoring floor: FairStress metrics as pure functions of validated response rows.

- ``metrics``: ``score``, ``compare``, ``compute_metrics`` and the headline (``HEADLINE``); ``score_report``: the
  ``ScoreReport`` ``score`` returns; ``score_warnings``: warnings for a user's own answers.
- ``paired``: an intervention against its baseline, paired on items; ``power``: the minimum detectable effect.
"""
