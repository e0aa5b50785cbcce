"""The framing floor: the words of reasoning text and of training corpora.

- ``lexicon``: word lists (hedges, boosters, group terms) and sentence polarity, shared by the explanation
  measures and the audit; its data files are in ``lexicon_data/``.
- ``judge``: an LLM reader through any engine, with versioned prompts.
- ``audit``: the training-data framing audit (``evenhand audit CORPUS``).
"""
