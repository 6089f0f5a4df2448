"""Credentials out of every text shown to a user: URL userinfo, the values
of credential query parameters and of credential environment variables.
Used by the messages of every layer (:mod:`infoclust_dask._support.messages`,
the CLI's error lines) and by the store's path checks
(:func:`infoclust_dask.storage.paths.check_path`, which re-exports
:func:`redact`); imports nothing of the package."""

from __future__ import annotations

import os
import re
from typing import Any

__all__ = ["redact", "has_query_secret", "SECRET_ENV", "CREDENTIAL_QUERY_WORDS"]

#: the userinfo of a URL: from ``://`` to the last ``@`` of the token (a secret may hold ``/`` or ``+``)
_URL_USERINFO = re.compile(r"(?<=://)[^\s'\"<>()\[\]]*@")
#: ``KEY:SECRET@host`` without its scheme (as a client library may echo a bucket name)
_BARE_USERINFO = re.compile(r"[^\s'\"<>()\[\]/:@]+:(?!//)[^\s'\"<>()\[\]@]+@")
#: environment variables whose values are credentials (their values are redacted from messages)
SECRET_ENV = re.compile(r"(secret|token|passw|credential|account_key|access_key|private|_sas|api_key)", re.I)
_REDACTED = "***"
#: a query parameter of a URL whose value is a credential: a presigned URL's ``X-Amz-Signature``,
#: ``X-Amz-Credential``, ``X-Amz-Security-Token``, an Azure SAS ``sig``, ``?secret=``, ``?token=``, ``?key=``...
CREDENTIAL_QUERY_WORDS = ("signature", "credential", "token", "secret", "passw", "key", "sig", "auth", "sas")
_WORDS = "|".join(CREDENTIAL_QUERY_WORDS)
_QUERY_SECRET = re.compile(
    r"(?<=[?&;])([^=&;\s'\"#<>]*(?:" + _WORDS + r")[^=&;\s'\"#<>]*)="
    r"[^&;\s'\"#<>]+", re.I)
#: the same, URL-encoded inside another URL or an object key (``%3Fsecret%3D...``, as a client library echoes it)
_ENCODED_QUERY_SECRET = re.compile(
    r"(?<=%3F|%26)([^=&;%\s'\"#<>]*(?:" + _WORDS + r")[^=&;%\s'\"#<>]*)"
    r"%3D(?:(?!%26)[^&;\s'\"#<>])+", re.I)


def has_query_secret(text: str) -> bool:
    """True when a query parameter of the URL ``text`` carries a credential
    (a parameter whose name holds one of :data:`CREDENTIAL_QUERY_WORDS`)."""
    return _QUERY_SECRET.search(text) is not None


def redact(text: Any) -> str:
    """``text`` with URL credentials (``scheme://USER:PASS@``, also without
    the scheme), the values of credential query parameters (a presigned
    URL's ``X-Amz-Signature=``, ``?secret=``, ``?token=``, ...) and the
    values of credential environment variables (:data:`SECRET_ENV`, e.g.
    ``AWS_SECRET_ACCESS_KEY``) replaced by ``***``."""
    text = _URL_USERINFO.sub(_REDACTED + "@", str(text))
    text = _QUERY_SECRET.sub(lambda m: f"{m.group(1)}={_REDACTED}", text)
    text = _ENCODED_QUERY_SECRET.sub(lambda m: f"{m.group(1)}%3D{_REDACTED}", text)
    text = _BARE_USERINFO.sub(_REDACTED + "@", text)
    for name, value in os.environ.items():
        if len(value) >= 6 and SECRET_ENV.search(name) and value in text:
            text = text.replace(value, _REDACTED)
    return text
