"""Installs the repository's top-level folders as one package, ``segmentstore``.

The folders stay side by side as the design lays them out (``segmentstore/``, ``tier1/``,
``tier2/``, ``cache/``, ``api/``, ``jobs/``), but site-packages gains ``segmentstore`` alone:
``tier1/`` installs as ``segmentstore.tier1`` and so on, so no module of a user's can collide
with them. Everything else about the package is in pyproject.toml.
"""

from setuptools import find_packages, setup

# installed package -> the repository folder that holds it
ROOTS = {
    "segmentstore": "segmentstore",
    "segmentstore.tier1": "tier1",
    "segmentstore.tier2": "tier2",
    "segmentstore.cache": "cache",
    "segmentstore.api": "api",
    "segmentstore.jobs": "jobs",
}

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
