"""Flows whose path and URL parameters are checked before Prefect records them.

Prefect creates a flow run - and stores its parameters in its database -
before the flow's body runs, so a refusal inside the body comes after a
secret in ``s3://KEY:SECRET@bucket/...`` or in a presigned URL's query string
is stored. Two guards close that gap (issue 53):

- :func:`checked_flow` makes a :class:`prefect.Flow` whose call checks every
  parameter annotated :data:`Location` with
  :func:`infoclust_dask.storage.paths.check_path` first: a direct call
  (``crossval_flow("s3://AK:SECRET@b/s.zarr")``) is refused with the secret
  hidden and no flow run is created;
- :data:`Location` carries a JSON-schema ``pattern`` into each deployment's
  parameter schema, so a Prefect server that enforces it (the default for
  deployments) refuses ``prefect deployment run ... --param
  store=s3://AK:SECRET@...`` before it creates the run.

Credentials come from the environment or fsspec's configuration of each
process (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, ~/.aws/credentials, ...).
"""

from __future__ import annotations

import inspect
import re
import typing
from typing import Annotated, Any

from prefect import Flow
from pydantic import WithJsonSchema

from infoclust_dask.storage.paths import CREDENTIAL_QUERY_WORDS, check_path


def _any_case(word: str) -> str:
    """``word`` as a character-class pattern matching it in any case (JSON
    Schema's regular expressions have no portable case-insensitive flag)."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word)


#: refuses ``scheme://...@`` (userinfo, as check_path does: '@' anywhere after the scheme) and a
#: query parameter whose name holds a credential word; plain portable regular-expression syntax
CREDENTIAL_FREE = (
    r"^(?![A-Za-z][A-Za-z0-9+.\-]*://.*@)"
    r"(?![A-Za-z][A-Za-z0-9+.\-]*://[^?]*\?(?:[^#]*[&;])?[^=&;#]*(?:"
    + "|".join(_any_case(w) for w in CREDENTIAL_QUERY_WORDS) + r")[^=&;#]*=).*$")


class _LocationMarker:
    """Marks a flow parameter as a path or URL (see :data:`Location`)."""


#: a flow parameter that is a path or URL: checked before the run exists, and in the deployment's schema
Location = Annotated[str, _LocationMarker(), WithJsonSchema({
    "type": "string", "pattern": CREDENTIAL_FREE,
    "description": "a local path or URL without credentials (they come from the environment)"})]


def _is_location(annotation: Any) -> bool:
    """True when ``annotation`` is :data:`Location` or an optional one."""
    if any(isinstance(m, _LocationMarker) for m in getattr(annotation, "__metadata__", ())):
        return True
    return any(_is_location(a) for a in typing.get_args(annotation))


def location_parameters(fn: Any) -> list[str]:
    """The names of ``fn``'s parameters annotated :data:`Location`."""
    hints = typing.get_type_hints(fn, include_extras=True)
    return [name for name, hint in hints.items() if name != "return" and _is_location(hint)]


class CheckedFlow(Flow):
    """A :class:`prefect.Flow` that checks its :data:`Location` parameters
    before Prefect creates the flow run (see the module's docstring)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        signature = inspect.signature(self.fn)  # Prefect's own keywords (return_state, wait_for) pass through
        bound = signature.bind_partial(*args, **{k: v for k, v in kwargs.items() if k in signature.parameters})
        for name in location_parameters(self.fn):
            value = bound.arguments.get(name)
            if value is not None:
                check_path(value, what=f"{self.name} parameter '{name}'")
        return super().__call__(*args, **kwargs)

    def with_options(self, *args: Any, **kwargs: Any) -> CheckedFlow:
        new = super().with_options(*args, **kwargs)
        new.__class__ = CheckedFlow  # Flow.with_options builds a plain Flow; keep the check
        return new  # type: ignore[return-value]


def checked_flow(**options: Any) -> Any:
    """``@flow(**options)`` making a :class:`CheckedFlow`."""
    def make(fn: Any) -> CheckedFlow:
        return CheckedFlow(fn, **options)
    return make
