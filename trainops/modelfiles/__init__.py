"""Model files, read as a format: safetensors headers (bounded, checked before they are
believed), the model facts ModelPack records (format, parameter size, precision,
architecture), and the tensor summary of an artifact read from the registry with ranged
reads. Used by the registry commands, release packaging and the Hub import, so none of them
imports another for it."""
