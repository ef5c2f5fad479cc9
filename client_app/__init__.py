"""The ClientApp and the client side of every round.

A node whose torch build cannot run there (another architecture's wheel, a missing system library) is told so in one
line when the ClientApp loads, naming the package and why, instead of failing deep inside the first message.
"""

from __future__ import annotations

import platform

try:
    import torch  # noqa: F401  (every client module needs it: checked once, here)
except (ImportError, OSError) as err:
    why = str(err).splitlines()[0] if str(err) else type(err).__name__
    raise ImportError(
        f"this node cannot load the ClientApp: torch does not import on {platform.machine()} (Python "
        f"{platform.python_version()}): {why}; install a torch build for this machine (docs/deployment.md, "
        "'Edge devices')"
    ) from None
