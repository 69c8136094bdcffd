"""Benchmarks behind ``segmentstore bench``: each figure comes with a same-run baseline.

Every benchmark of the project is here, the Spark data source's bare baseline (:mod:`.spark`)
included (the HTTP API's are HTTP apps, so they live in :mod:`segmentstore.api.baselines`);
the processes they start come from :mod:`segmentstore.harness`.
May import: ``store``, ``containers``, ``client``, ``tier2``, ``harness``, ``api`` and
``jobs`` (what it measures), ``contracts`` and ``vocabulary``.
"""
