"""What every layer shares and no user calls: ``INFOCLUST_*`` settings parsed
one way (:mod:`.settings`), the block-size policy (:mod:`.sizes`), parameter
constraints (:mod:`.validation`), messages and progress lines
(:mod:`.messages`, :mod:`.progress`), type hints of the public signatures
(:mod:`.hints`), and process care (:mod:`.watchdog`: children die with their
parent; :mod:`.malloc`: large freed blocks go back to the system)."""
