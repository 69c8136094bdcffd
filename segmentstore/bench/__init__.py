"""Benchmarks behind ``segmentstore bench``: each figure comes with a same-run baseline.

Every benchmark of the project is here, the HTTP API's bare baselines (:mod:`.http_baselines`)
and the Spark data source's (:mod:`.spark`) included; the processes they start come from
:mod:`segmentstore.harness`.
May import: ``store``, ``containers``, ``client``, ``tier2``, ``harness``, ``api`` and
``jobs`` (what it measures), ``contracts`` and ``vocabulary``.
"""
