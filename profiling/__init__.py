"""kwiki.profiling: the Nsight Compute diagnosis engine.

* ``catalog`` (``catalog.yaml``): the metrics kwiki understands and all their spellings.
* ``signals`` (``signals.yaml``): the NCU signals, their pattern pages, phrases and thresholds.
* ``ncu_csv`` / ``inputs``: parsers for raw/details/plain CSV, JSON and .ncu-rep exports.
* ``rules`` / ``rulebase`` / ``messages``: one pure rule per signal, plus ncu rule-message reading.
* ``routing``: ``route(text)`` for the search engine.
* ``diagnose``: ``diagnose_bytes``, ``diagnose_metrics``, ``diagnose_text``.
"""
