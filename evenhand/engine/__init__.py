"""The decision engines behind :func:`evenhand.running.decisions.decide`, in public modules other packages build on.

- :mod:`.registry`: the :class:`~.registry.Engine` protocol and the registry ``decide()`` dispatches through
  (``engine: hf | vllm | one you register``; docs/ARCHITECTURE.md, "Adding an engine");
- :mod:`.hf_engine`: the Hugging Face engine (every mode; the default and the reference), on
  :mod:`.generation` (greedy generation with the generated text's log-probability) and :mod:`.scoring`
  (the two labels' log-probabilities as continuations of a prompt);
- :mod:`.vllm_engine`: the vLLM engine (answer and reasoning modes, the same rows; ``engine: vllm``);
- :mod:`.batching`: tokenising, batch plans (length bucketing, input order, token order), left
  padding with position ids, and :class:`~.batching.Halving` (a batch split in halves on out-of-memory);
- :mod:`.hooks`: hidden-state edits and the ``steer``/``observe`` context managers at model sites (public face:
  :mod:`steering.hooks`); :mod:`.reader`: the one activation reader on them (batches, OOM halving, host copies);
- :mod:`.prefix`: prefix reuse (shared prompt prefixes run once, their KV cache laid out per row);
- :mod:`.rows`: the one place a response row (item fields, engine output, choice) is built.
"""
