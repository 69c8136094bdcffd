"""How a client checks an ``https://`` server: the ``verify`` option of both clients.

``True`` checks the server's certificate against the system's authorities, a path names a CA
bundle (a PEM file, or a directory of them) to check it against instead, and ``False`` checks
nothing (tests only). httpx takes the first and last as they are; a path becomes an SSL
context here, the form httpx asks for.
"""

from __future__ import annotations

import os
import ssl


def tls_verification(verify: bool | str | os.PathLike[str]) -> bool | ssl.SSLContext:
    if isinstance(verify, bool):
        return verify
    path = os.fspath(verify)
    if os.path.isdir(path):
        return ssl.create_default_context(capath=path)
    return ssl.create_default_context(cafile=path)
