"""The level whose feature maps clients send the server as metadata: one setting, shared by FedSplit (thesis Ch. 6)
and FedAT (Ch. 5), which both train the model's stages above that level on the maps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from run_config.settings import one_of, setting

#: The split levels of the app's models.
LEVELS = ("low", "mid", "up")
LEVEL_KEY = "common.metadata-level"


@dataclass(frozen=True)
class MetadataLevelSettings:
    NAMESPACE: ClassVar[str] = "common"

    metadata_level: str = setting(
        "low",
        "FedSplit, FedAT: level l of the feature maps clients send as metadata (`low`, `mid` or `up`, a split level "
        "of the model; the thesis uses low); the server trains the stages above it on them.",
        one_of(*LEVELS),
    )
