"""Installs the repository's top-level folders as one package, ``segmentstore``.

The folders stay side by side as the design lays them out (``segmentstore/``, ``tier1/``,
``tier2/``, ``cache/``, ``api/``, ``jobs/``), but site-packages gains ``segmentstore`` alone:
``tier1/`` installs as ``segmentstore.tier1`` and so on, so no module of a user's can collide
with them. Everything else about the package is in pyproject.toml.
"""

import tomllib
from pathlib import Path

from setuptools import find_packages, setup

# installed package -> the repository folder that holds it (pyproject.toml holds the mapping)
with (Path(__file__).parent / "pyproject.toml").open("rb") as pyproject:
    ROOTS: dict[str, str] = tomllib.load(pyproject)["tool"]["segmentstore"]["package-folders"]

setup(
    package_dir=ROOTS,
    packages=[
        f"{package}.{sub}" if sub else package
        for package, folder in ROOTS.items()
        for sub in ["", *find_packages(folder)]
    ],
    package_data={
        "segmentstore": ["py.typed"],
        # the status page's HTML, script and style sheet, served as they are (no build step)
        "segmentstore.api.status_page": ["static/*"],
    },
)
