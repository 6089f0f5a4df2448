"""The bodies of the ``infoclust`` sub-commands that outgrew ``cli.py``
(which keeps the parser, the common error handling and the small commands)."""
