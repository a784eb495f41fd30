"""Moved to trainops.modelfiles.safetensors (a model-file format, not the Hub). This thin
re-export keeps branches written against the old path importable during the structure
wave; import from trainops.modelfiles.safetensors, and delete this file after it."""

from trainops.modelfiles.safetensors import *  # noqa: F403
from trainops.modelfiles.safetensors import (  # noqa: F401
    MAX_CONFIG,
    MAX_HEADER,
    ModelInfo,
    SafetensorsHeader,
    model_info,
    param_size,
    read_file_header,
    read_header,
    summarize,
)
